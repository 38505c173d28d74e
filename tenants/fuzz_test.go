package tenants

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
)

// FuzzSpecPatch fuzzes the admin API's way in for a tenant: a spec decoded
// with DecodeSpec, stored with its defaults when Validate accepts the
// merged configuration, then a JSON merge patch applied with ApplyPatch and
// validated again (what Registry.Put and Registry.Patch do). For any tenant
// id, spec and patch, each step ends in one of:
//
//   - a *SpecError of the id whose every problem has a message and names a
//     field (only a problem with the document as a whole, or with the id,
//     names none), its Key being the field under "tenants.<id>";
//   - a spec that passes Validate, whose id is not one the issue forbids
//     (".", "..", "_other"), and whose every admission policy (the tenant's
//     and each job type's) is accepted by limits.Policy.Validate and by a
//     real admission on the real Redis (Admitter.Admit of cost 1 returns no
//     error and leaves its key with a TTL): the validator and the script
//     agree.
//
// And every spec decoded, stored or patched encodes (EncodeSpec) to JSON
// that decodes back to an equal spec.
func FuzzSpecPatch(f *testing.F) {
	full, err := EncodeSpec(fullTenant())
	if err != nil {
		f.Fatal(err)
	}
	specs := []string{
		`{"admission":{"algorithm":"gcra","limit":2000000,"period":"1s"}}`,
		`{"admission":{"algorithm":"gcra","limit":9223372036854775807,"period":"1s"}}`,
		`{"admission":{"algorithm":"gcra","limit":10,"burst":9223372036854775807}}`,
		`{"admission":{"algorithm":"fixed_window","limit":9223372036854775807}}`,
		`{"admission":{"algorithm":"token_bucket","limit":9007199254740993,"period":"2562047h"}}`,
		`{"admission":{"algorithm":"token_bucket","limit":1,"period":"2562047h"}}`,
		`{"admission":{"algorithm":"fixed_window","limit":1,"period":"2562047h"}}`,
		`{"admission":{"algorithm":"sliding_log","limit":1099511627776,"period":"1h"}}`,
		`{"admission":{"algorithm":"sliding_window","limit":1000,"period":"1m"}}`,
		`{"admission":{"algorithm":"gcra","limit":10,"period":1000000000}}`,
		`{"admission":{"algorithm":"gcra","limit":1.5}}`,
		`{"outflow":{"rate":0}}`,
		`{"outflow":{"rate":-1}}`,
		`{"outflow":{"rate":"NaN"}}`,
		`{"outflow":{"rate":1e400}}`,
		`{"outflow":{"rate":5,"capacity":0.5,"min_rate":6}}`,
		`{"job_types":{"encode":{"admission":{"algorithm":"gcra","limit":2000000,"period":"1s"}},"bad name":{}}}`,
		`{"on_limiter_error":"maybe","target":{"url":"ftp://x"}}`,
		`{"api_keys":["sha256:00"],"extra":1}`,
		`{"OUTFLOW":{"Rate":1}}`,
		`{"outflow":{"rate":1},"outflow":{"rate":2}}`,
		`{"outflow":{"rate":1,"rate":-1}}`,
		`{"":0}`,
		`{"job_types":{"a, b":{}}}`,
		`{"outflow":{"a, b":1}}`,
		`{}`, `null`, `[]`, `{} {}`, `{`,
		string(full),
	}
	patches := []string{
		`{}`,
		`{"outflow":{"rate":0}}`,
		`{"outflow":{"rate":"NaN"}}`,
		`{"admission":{"limit":2000000}}`,
		`{"admission":{"limit":9223372036854775807,"burst":null}}`,
		`{"admission":{"algorithm":"sliding_log","limit":1099511627776,"period":"1h"}}`,
		`{"admission":{"algorithm":"token_bucket","limit":9007199254740993,"period":"2562047h"}}`,
		`{"admission":null,"job_types":{"encode":null}}`,
		`{"job_types":{"x":{"admission":{"algorithm":"gcra","limit":1,"burst":9223372036854775807}}}}`,
		`{"Outflow":{"RATE":1}}`,
		`{"admission":{"limit":1,"limit":2}}`,
		`{"":0}`, `{"outflow":{"":0, "x, y":1}}`,
		`null`, `[]`, `1`, `{`,
	}
	for _, s := range specs {
		f.Add("acme", []byte(s), []byte(`{}`))
	}
	for _, p := range patches {
		f.Add("acme", full, []byte(p))
		f.Add("acme", []byte(`{}`), []byte(p))
	}
	for _, id := range []string{".", "..", "_other", "a b", ""} {
		f.Add(id, full, []byte(`{}`))
	}

	rdb := testenv.Redis(f)
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		f.Fatal(err)
	}
	base, err := config.Parse(nil)
	if err != nil {
		f.Fatal(err)
	}
	// Admissions run under a tenant of their own (the fuzzed id is any
	// string); its keys are removed when the fuzz process ends.
	admTenant := testenv.Name(f, "fz-spec")
	f.Cleanup(func() { testenv.DeleteTenant(f, rdb, admTenant) })
	fz := &specFuzz{rdb: rdb, adm: adm, base: base, admTenant: admTenant}

	f.Fuzz(func(t *testing.T, id string, spec, patch []byte) {
		if !keys.ValidTenant(id) {
			return // Registry refuses the id before reading anything
		}
		t0, err := DecodeSpec(id, spec)
		if err != nil {
			fz.checkSpecError(t, id, "DecodeSpec", spec, err)
			return
		}
		if msg := strictSpec(spec); msg != "" {
			specViolation(t, "strict", "DecodeSpec accepts %q: %s", spec, msg)
		}
		fz.checkRoundTrip(t, id, "decoded", t0)
		stored, ok := fz.checkStored(t, id, t0)
		if !ok {
			return
		}
		t1, err := ApplyPatch(id, stored, patch)
		if err != nil {
			fz.checkSpecError(t, id, "ApplyPatch", patch, err)
			return
		}
		if msg := strictSpec(patch); msg != "" {
			specViolation(t, "strict", "ApplyPatch accepts %q: %s", patch, msg)
		}
		fz.checkRoundTrip(t, id, "patched", t1)
		fz.checkStored(t, id, t1)
	})
}

// specFuzz is FuzzSpecPatch's per-process state.
type specFuzz struct {
	rdb       *redis.Client
	adm       *limits.Admitter
	base      *config.Config
	admTenant string
}

// specPending are the invariants whose fixes are still open in issue 7: a
// violation skips the input naming the item instead of failing it, so the
// fuzzer keeps looking for other bugs. Delete an entry once it is fixed;
// the seeds and testdata inputs that exercise it then pass.
var specPending = map[string]string{}

func specViolation(t *testing.T, kind, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if item, ok := specPending[kind]; ok {
		t.Skipf("known bug, fixed by %s: %s", item, msg)
	}
	t.Fatal(msg)
}

// wholeDocument are the starts of the only messages that may name no field:
// problems with the document as a whole, or with the tenant id.
var wholeDocument = []string{"not JSON", "must be a JSON object", "more than one JSON value",
	"patch is not JSON", "patch has more than one JSON value", "tenant id must"}

// checkSpecError checks the error of step; raw is the JSON it decoded (nil
// for Validate), which must hold every member an "unknown field" problem
// names.
func (fz *specFuzz) checkSpecError(t *testing.T, id, step string, raw []byte, err error) {
	t.Helper()
	var se *SpecError
	if !errors.As(err, &se) {
		t.Fatalf("%s: %v (%T), want a *SpecError", step, err, err)
	}
	if se.Tenant != id || len(se.Problems) == 0 {
		t.Fatalf("%s: SpecError of tenant %q with %d problems, want tenant %q and at least one", step, se.Tenant, len(se.Problems), id)
	}
	for _, p := range se.Problems {
		if p.Msg == "" || p.Key != joinPath("tenants."+id, p.Field) {
			t.Fatalf("%s: problem %+v: want a message and Key = tenants.%s.<field>", step, p, id)
		}
		if p.Field != "" {
			if raw != nil && p.Msg == "unknown field" && !namesMember(raw, p.Field) {
				specViolation(t, "strict", "%s: problem %+v names a member that %q does not have", step, p, raw)
			}
			continue
		}
		named := false
		for _, w := range wholeDocument {
			named = named || strings.HasPrefix(p.Msg, w)
		}
		if !named && p.Msg == "unknown field" {
			specViolation(t, "empty-name", "%s: problem %+v names no field (a member named \"\")", step, p)
		}
		if !named {
			t.Fatalf("%s: problem %+v names no field", step, p)
		}
	}
}

// namesMember says whether raw has a member whose name, decoded, is the
// last segment of field, or (a name with dots in it) its last few segments.
func namesMember(raw []byte, field string) bool {
	names := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // a number out of float64's range (1e700) must not end the walk
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if s, ok := tok.(string); ok {
			names[s] = true // member names and string values alike: lenient
			if s == "" {
				names[`""`] = true // strictjson names a member "" visibly
			}
		}
	}
	segs := strings.Split(field, ".")
	for i := len(segs) - 1; i >= 0; i-- {
		if names[strings.Join(segs[i:], ".")] {
			return true
		}
	}
	return false
}

// specOpts compare specs as JSON sees them: an empty list or map is absent.
var specOpts = cmpopts.EquateEmpty()

func (fz *specFuzz) checkRoundTrip(t *testing.T, id, what string, spec config.Tenant) {
	t.Helper()
	b, err := EncodeSpec(spec)
	if err != nil {
		t.Fatalf("EncodeSpec of the %s spec %+v: %v", what, spec, err)
	}
	back, err := DecodeSpec(id, b)
	if err != nil {
		t.Fatalf("the %s spec encodes to %s, which does not decode: %v", what, b, err)
	}
	if diff := cmp.Diff(spec, back, specOpts); diff != "" {
		t.Fatalf("the %s spec encodes to %s, which decodes to another spec (-want +got):\n%s", what, b, diff)
	}
}

// checkStored validates spec as Registry.write does (defaults, merged
// configuration, Validate); when it passes, it checks the id and every
// admission policy and returns the stored spec.
func (fz *specFuzz) checkStored(t *testing.T, id string, spec config.Tenant) (config.Tenant, bool) {
	t.Helper()
	spec = spec.WithDefaults()
	if err := Validate(Merge(fz.base, []Record{{Tenant: id, Spec: &spec}}), id); err != nil {
		fz.checkSpecError(t, id, "Validate", nil, err)
		return config.Tenant{}, false
	}
	fz.checkRoundTrip(t, id, "stored", spec)
	switch id {
	case ".", "..", "_other":
		specViolation(t, "id", "Validate accepts the tenant id %q", id)
	}
	fz.checkPolicy(t, "admission", "tenant", spec.Admission)
	for typ, jt := range spec.JobTypes {
		fz.checkPolicy(t, "job_types."+typ+".admission", "type."+typ, jt.Admission)
	}
	return spec, true
}

// checkPolicy checks that an admission policy Validate accepted (defaults
// applied) is one limits.Policy.Validate and the admission script accept.
func (fz *specFuzz) checkPolicy(t *testing.T, field, name string, a config.Admission) {
	t.Helper()
	if a.Algorithm == "" {
		return
	}
	p := limits.Policy{Name: name, Algorithm: limits.Algorithm(a.Algorithm), Limit: a.Limit, Period: a.Period, Burst: a.Burst}
	if err := p.Validate(); err != nil {
		specViolation(t, "policy", "Validate accepts %s %+v, limits.Policy.Validate refuses it: %v", field, a, err)
	}
	ctx := context.Background()
	const nowUs = 1_700_000_040_000_000
	now := time.UnixMicro(nowUs)
	// The state key; fixed_window's is its window's (see lua/fixed_window.lua).
	key := keys.Admission(fz.admTenant, a.Algorithm, name)
	if us := p.Period.Microseconds(); p.Algorithm == limits.AlgFixedWindow && us > 0 {
		key += ":" + strconv.FormatInt(nowUs/us, 10)
	}
	fz.rdb.Del(ctx, key)
	defer fz.rdb.Del(ctx, key)
	d, err := fz.adm.Admit(ctx, limits.Request{Tenant: fz.admTenant, Policies: []limits.Policy{p}, Cost: 1, Now: now})
	if err != nil {
		specViolation(t, "policy", "Validate accepts %s %+v, the admission script refuses it: %v", field, a, err)
	}
	if !d.Allowed || len(d.Results) != 1 || d.Results[0].Limit != p.Capacity() {
		specViolation(t, "policy", "Validate accepts %s %+v, the admission script answers %+v to cost 1 from an empty state (capacity %d)", field, a, d, p.Capacity())
	}
	if pttl := fz.rdb.PTTL(ctx, key).Val(); pttl == -1 {
		t.Fatalf("%s %+v: admission left %s without a TTL", field, a, key)
	}
}
