package tenants

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// changesText is an entry's changes in one line: "path: old → new; …",
// "-" for a side that is not set.
func changesText(e AuditEntry) string {
	side := func(v *string) string {
		if v == nil {
			return "-"
		}
		return *v
	}
	parts := make([]string, 0, len(e.Changes))
	for _, c := range e.Changes {
		parts = append(parts, c.Path+": "+side(c.Old)+" → "+side(c.New))
	}
	return strings.Join(parts, "; ")
}

func mustChanges(t testing.TB, old, new []byte) []AuditChange {
	t.Helper()
	c, err := specChanges(old, new)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func rawSpec(t testing.TB, spec config.Tenant) []byte {
	t.Helper()
	b, err := EncodeSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bigSpec is a spec of about 64 KiB whose every job type's limit and every
// API key differ with i, so a change from bigSpec(i) to bigSpec(i+1)
// touches some 500 fields with long values.
func bigSpec(i int) config.Tenant {
	t := config.Tenant{
		Admission: config.Admission{Algorithm: "gcra", Limit: int64(100 + i), Period: time.Second, Burst: 10},
		Outflow:   config.Outflow{Rate: 5, Capacity: 5},
		Target:    config.Target{URL: "http://127.0.0.1:9/" + strings.Repeat("p", 2000) + fmt.Sprint(i)},
		JobTypes:  map[string]config.JobType{},
	}
	for j := range 540 {
		t.APIKeys = append(t.APIKeys, config.HashKey(fmt.Sprintf("key-%d-%d", i, j)))
	}
	for j := range 150 {
		t.JobTypes[fmt.Sprintf("type-%03d", j)] = config.JobType{
			Admission: config.Admission{Algorithm: "token_bucket", Limit: int64(1000 + i + j), Period: time.Minute, Burst: 50},
			Target:    config.Target{URL: fmt.Sprintf("http://127.0.0.1:9/type/%d/%d", j, i)},
		}
	}
	return t.WithDefaults()
}

func TestClip(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 1000)
	for _, c := range []struct {
		name, in string
		cut      bool
	}{
		{"short", "5", false},
		{"exactly fits", strings.Repeat("a", AuditValueMaxBytes-2), false},
		{"one over", strings.Repeat("a", AuditValueMaxBytes-1), true},
		{"long", long, true},
		{"quotes escape", strings.Repeat(`"`, 200), true},
		{"html escapes", strings.Repeat("<&>", 100), true},
		{"control characters", strings.Repeat("\x01\n", 100), true},
		{"multi-byte runes", strings.Repeat("é€😀", 100), true},
		{"invalid UTF-8", strings.Repeat("\xff", 300), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, cut := clip(c.in)
			b, _ := json.Marshal(got)
			if cut != c.cut || len(b) > AuditValueMaxBytes || !strings.HasPrefix(c.in, got) {
				t.Errorf("clip = %d bytes (JSON %d), cut %v; want a prefix of at most %d bytes of JSON, cut %v",
					len(got), len(b), cut, AuditValueMaxBytes, c.cut)
			}
			if cut && c.name != "invalid UTF-8" && (!utf8.ValidString(got) || len(b) < AuditValueMaxBytes-7) {
				t.Errorf("clip cut to %d bytes of JSON at a UTF-8 boundary %v; want the longest prefix", len(b), utf8.ValidString(got))
			}
		})
	}
}

// TestAuditEntryBounds checks that an entry is at most AuditEntryMaxBytes
// whatever the specs, lists what changed by path, and marks what it cut.
func TestAuditEntryBounds(t *testing.T) {
	t.Parallel()
	small := config.Tenant{Outflow: config.Outflow{Rate: 5, Capacity: 7}}.WithDefaults()
	faster := small
	faster.Outflow.Rate = 20
	hostile := small
	hostile.Target.URL = "http://h/" + strings.Repeat(`"<\>&`, 20000)
	for _, c := range []struct {
		name          string
		old, new      []byte
		who           string
		wantTruncated bool
		check         func(t *testing.T, e AuditEntry)
	}{
		{"one field", rawSpec(t, small), rawSpec(t, faster), "ops", false, func(t *testing.T, e AuditEntry) {
			if got := changesText(e); got != "outflow.rate: 5 → 20" || e.ChangesTotal != 1 {
				t.Errorf("changes %q (total %d), want outflow.rate: 5 → 20", got, e.ChangesTotal)
			}
		}},
		{"no change", rawSpec(t, small), rawSpec(t, small), "ops", false, func(t *testing.T, e AuditEntry) {
			if e.Changes == nil || len(e.Changes) != 0 || e.ChangesTotal != 0 {
				t.Errorf("changes %#v, total %d; want an empty list", e.Changes, e.ChangesTotal)
			}
		}},
		{"create of a 64 KiB spec", nil, rawSpec(t, bigSpec(1)), "ops", true, nil},
		{"update of a 64 KiB spec", rawSpec(t, bigSpec(1)), rawSpec(t, bigSpec(2)), "ops", true, nil},
		{"delete of a 64 KiB spec", rawSpec(t, bigSpec(1)), nil, "ops", true, nil},
		{"escape-heavy value", rawSpec(t, small), rawSpec(t, hostile), "ops", false, func(t *testing.T, e AuditEntry) {
			if len(e.Changes) != 1 || !e.Changes[0].Truncated || e.Changes[0].Path != "target.url" {
				t.Errorf("changes %+v, want target.url cut", e.Changes)
			}
		}},
		{"long who", rawSpec(t, small), rawSpec(t, faster), strings.Repeat("w", 5000), false, func(t *testing.T, e AuditEntry) {
			if len(e.Who) > AuditValueMaxBytes {
				t.Errorf("who of %d bytes, want at most %d", len(e.Who), AuditValueMaxBytes)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, b, err := newAuditEntry(testAt, c.who, ActionUpdate, 7, c.old, c.new)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > AuditEntryMaxBytes {
				t.Errorf("entry of %d bytes, the bound is %d", len(b), AuditEntryMaxBytes)
			}
			if e.Truncated != c.wantTruncated || (e.Truncated && e.ChangesTotal <= len(e.Changes)) || (!e.Truncated && e.ChangesTotal != len(e.Changes)) {
				t.Errorf("truncated %v with %d of %d changes listed, want truncated %v", e.Truncated, len(e.Changes), e.ChangesTotal, c.wantTruncated)
			}
			for i, ch := range e.Changes {
				for _, v := range []*string{&ch.Path, ch.Old, ch.New} {
					if v == nil {
						continue
					}
					if j, _ := json.Marshal(*v); len(j) > AuditValueMaxBytes {
						t.Errorf("change %d (%s): a value of %d bytes of JSON, want at most %d", i, ch.Path, len(j), AuditValueMaxBytes)
					}
				}
				if i > 0 && e.Changes[i-1].Path >= ch.Path {
					t.Errorf("changes not sorted by path: %q before %q", e.Changes[i-1].Path, ch.Path)
				}
			}
			var back AuditEntry
			if err := json.Unmarshal(b, &back); err != nil || !cmp.Equal(e, back) {
				t.Errorf("the encoding does not decode to the entry (%v):\n%s", err, cmp.Diff(e, back))
			}
			if c.check != nil {
				c.check(t, e)
			}
		})
	}
}

// legacyEntry is an audit entry of the old format: the whole specs.
func legacyEntry(t testing.TB, version int64, action string, old, new []byte) string {
	t.Helper()
	raw := func(b []byte) json.RawMessage {
		if b == nil {
			return json.RawMessage("null")
		}
		return b
	}
	b, err := json.Marshal(map[string]any{"at": testAt, "who": "carol", "action": action, "version": version,
		"old": raw(old), "new": raw(new)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAuditOldFormat puts entries of the old format (whole specs, as the
// previous version wrote them) in Redis directly: pages show them as their
// changes, within the entry bound, and the next write trims them to the
// byte cap.
func TestAuditOldFormat(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	s := newStore(t, rdb)
	id := tenantName(t, rdb)
	small := config.Tenant{Outflow: config.Outflow{Rate: 2}}.WithDefaults()
	faster := small
	faster.Outflow.Rate = 20
	big := [2][]byte{rawSpec(t, bigSpec(0)), rawSpec(t, bigSpec(1))}
	// Oldest first: create, 30 changes between the big specs (about 130 KB
	// each, 3.9 MB in all, far past the byte cap), then small ones.
	entries := []string{legacyEntry(t, 1, ActionCreate, nil, big[0])}
	for v := int64(2); v <= 31; v++ {
		entries = append(entries, legacyEntry(t, v, ActionUpdate, big[v%2], big[(v+1)%2]))
	}
	entries = append(entries, legacyEntry(t, 32, ActionUpdate, big[0], rawSpec(t, small)),
		legacyEntry(t, 33, ActionUpdate, rawSpec(t, small), rawSpec(t, faster)))
	for _, e := range entries {
		rdb.LPush(ctx, keys.Audit(id), e)
	}
	rdb.HSet(ctx, keys.Override(id), "spec", string(rawSpec(t, faster)), "version", 33)
	for _, k := range []string{keys.Audit(id), keys.Override(id)} {
		rdb.PExpire(ctx, k, keys.OverrideTTL)
	}

	page, err := s.Audit(ctx, id, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 2 || page.Next != 32 || changesText(page.Entries[0]) != "outflow.rate: 2 → 20" ||
		page.Entries[0].Who != "carol" || !page.Entries[0].At.Equal(testAt) {
		t.Fatalf("first page %+v, next %d; want versions 33 (outflow.rate: 2 → 20) and 32, next 32", page.Entries, page.Next)
	}
	if diff := cmp.Diff(countdown(33, 1), readAll(t, s, id, AuditPageMax)); diff != "" {
		t.Errorf("old-format versions (-want +got):\n%s", diff)
	}

	// The first write keeps only the newest entries within the byte cap.
	if _, err := s.Write(ctx, Change{Tenant: id, Expect: 33, Op: OpPut, Spec: small, Old: &faster, Who: "alice", Action: ActionUpdate, At: testAt}); err != nil {
		t.Fatal(err)
	}
	count, size := auditBytes(t, rdb, id)
	if size > keys.AuditMaxBytes || count < 3 {
		t.Errorf("after a write: %d entries in %d bytes, want the newest within %d bytes", count, size, keys.AuditMaxBytes)
	}
	if diff := cmp.Diff(countdown(34, int64(34-count+1)), readAll(t, s, id, 5)); diff != "" {
		t.Errorf("versions after a write (-want +got):\n%s", diff)
	}
}

// TestAuditUnexpectedList reads lists the write script did not write: an
// entry that is not JSON is skipped, and a list without the override
// hash's version (so no entry is where the page script looks) is still read
// in order, every entry once.
func TestAuditUnexpectedList(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	s := newStore(t, rdb)
	id := tenantName(t, rdb)
	for v := int64(1); v <= 12; v++ {
		e := legacyEntry(t, v, ActionUpdate, nil, nil)
		if v == 5 {
			e = "not json"
		}
		rdb.LPush(ctx, keys.Audit(id), e)
	}
	rdb.PExpire(ctx, keys.Audit(id), time.Minute)
	want := append(countdown(12, 6), countdown(4, 1)...)
	for _, limit := range []int{100, 3} {
		if diff := cmp.Diff(want, readAll(t, s, id, limit)); diff != "" {
			t.Errorf("versions by %d (-want +got):\n%s", limit, diff)
		}
	}
}
