package keys

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The id rules as regexps: the reference ValidTenant and ValidID's byte
// loop must agree with.
var (
	tenantRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	idRe     = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
)

func refTenant(id string) bool {
	return tenantRe.MatchString(id) && id != "." && id != ".." && id[0] != '_'
}

func refID(id string) bool { return idRe.MatchString(id) && id != "." && id != ".." }

// TestValidMatchesRegexp: ValidTenant and ValidID answer as the regexps of
// the rules for every string of up to 2 bytes, for lengths at and around
// each bound, and for 20,000 random strings of the allowed bytes, a few
// others and multi-byte runes.
func TestValidMatchesRegexp(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := ValidTenant(s), refTenant(s); got != want {
			t.Fatalf("ValidTenant(%q) = %v, want %v", s, got, want)
		}
		if got, want := ValidID(s), refID(s); got != want {
			t.Fatalf("ValidID(%q) = %v, want %v", s, got, want)
		}
	}
	check("")
	for a := 0; a < 256; a++ {
		check(string([]byte{byte(a)}))
		for b := 0; b < 256; b++ {
			check(string([]byte{byte(a), byte(b)}))
		}
	}
	for _, n := range []int{63, 64, 65, 127, 128, 129} {
		check(strings.Repeat("a", n))
		check(strings.Repeat(":", n))
		check("_" + strings.Repeat("a", n-1))
	}
	const alphabet = "aZ09._-:_/ é\x00{}"
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for n := r.IntN(70); n > 0; n-- {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		check(b.String())
	}
}

func BenchmarkValidTenant(b *testing.B) {
	for b.Loop() {
		ValidTenant("acme-tenant-0042")
	}
}

// BenchmarkValidTenantRegexp is the rule as the regexp it was, for
// comparison with BenchmarkValidTenant.
func BenchmarkValidTenantRegexp(b *testing.B) {
	for b.Loop() {
		refTenant("acme-tenant-0042")
	}
}
