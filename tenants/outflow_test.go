package tenants

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
)

// TestSpecOutflowRate: a spec's rate of 0 (or out of bounds) is a
// *SpecError naming outflow.rate with the way to stop delivery; unlimited
// is spelled out and round-trips through EncodeSpec without a rate.
func TestSpecOutflowRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, field, msg string }{
		{`{"outflow":{"rate":0}}`, "outflow.rate", "must be > 0 units per second (got 0); " + config.StopHint},
		{`{"outflow":{"rate":-1}}`, "outflow.rate", "must be > 0 units per second (got -1)"},
		{`{"outflow":{"rate":1e400}}`, "outflow.rate", "must be a finite number of units per second (got +Inf)"},
		{`{"outflow":{"rate":1000001}}`, "outflow.rate", "must be <= 1000000 units per second"},
		{`{"outflow":{"rate":5,"unlimited":true}}`, "outflow.unlimited", "true excludes a rate"},
		{`{"outflow":{"unlimited":false}}`, "outflow.unlimited", "false needs a rate"},
		{`{"outflow":{"rate":"5"}}`, "outflow.rate", "expected type 'float64'"},
	} {
		_, err := DecodeSpec("acme", []byte(tc.spec))
		se, ok := IsSpecError(err)
		if !ok || se.Problems[0].Field != tc.field || !strings.Contains(se.Problems[0].Msg, tc.msg) ||
			se.Problems[0].Key != "tenants.acme."+tc.field {
			t.Errorf("DecodeSpec(%s) = %v, want a problem of %s containing %q", tc.spec, err, tc.field, tc.msg)
		}
	}

	unl := config.Tenant{Outflow: config.Outflow{MaxBacklog: 7}}.WithDefaults()
	b, err := EncodeSpec(unl)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"outflow":{"adaptive":true,"capacity":0,"concurrency":0,"max_backlog":7,"min_rate":0,"paused":false,"unlimited":true}`; !strings.Contains(string(b), want) {
		t.Errorf("EncodeSpec(unlimited) = %s, want it to contain %s", b, want)
	}
	back, err := DecodeSpec("acme", b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(unl.Outflow, back.WithDefaults().Outflow); diff != "" {
		t.Errorf("round trip of an unlimited spec (-want +got):\n%s", diff)
	}
	shaped := config.Tenant{Outflow: config.Outflow{Rate: 5}}.WithDefaults()
	if b, _ := EncodeSpec(shaped); strings.Contains(string(b), "unlimited") || !strings.Contains(string(b), `"rate":5`) {
		t.Errorf("EncodeSpec(shaped) = %s, want a rate and no unlimited", b)
	}
}

// TestPatchOutflowChoice: rate and unlimited are one choice; a patch setting
// one replaces the other.
func TestPatchOutflowChoice(t *testing.T) {
	t.Parallel()
	unl := config.Tenant{Outflow: config.Outflow{MaxBacklog: 7}}.WithDefaults()
	shaped := config.Tenant{Outflow: config.Outflow{Rate: 5, MaxBacklog: 7}}.WithDefaults()
	for _, tc := range []struct {
		name  string
		cur   config.Tenant
		patch string
		want  config.Outflow // defaults applied
		field string         // the refused field, "" when accepted
	}{
		{"rate over unlimited shapes", unl, `{"outflow":{"rate":3}}`, config.Outflow{Rate: 3, MaxBacklog: 7}.WithDefaults(), ""},
		{"unlimited over a rate lifts it and its bucket", shaped, `{"outflow":{"unlimited":true}}`, config.Outflow{MaxBacklog: 7}.WithDefaults(), ""},
		{"unlimited with a capacity has no bucket", shaped, `{"outflow":{"unlimited":true,"capacity":9}}`, config.Outflow{MaxBacklog: 7}.WithDefaults(), ""},
		{"rate null over shaped is unlimited", shaped, `{"outflow":{"rate":null,"capacity":null,"min_rate":null}}`, config.Outflow{MaxBacklog: 7}.WithDefaults(), ""},
		{"rate null alone drops the bucket", shaped, `{"outflow":{"rate":null}}`, config.Outflow{MaxBacklog: 7}.WithDefaults(), ""},
		{"rate 0 over shaped", shaped, `{"outflow":{"rate":0}}`, config.Outflow{}, "outflow.rate"},
		{"rate 0 over unlimited", unl, `{"outflow":{"rate":0}}`, config.Outflow{}, "outflow.rate"},
		{"both", unl, `{"outflow":{"rate":3,"unlimited":true}}`, config.Outflow{}, "outflow.unlimited"},
		{"unlimited false over unlimited", unl, `{"outflow":{"unlimited":false}}`, config.Outflow{}, "outflow.unlimited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ApplyPatch("acme", tc.cur, []byte(tc.patch))
			if tc.field != "" {
				if se, ok := IsSpecError(err); !ok || se.Problems[0].Field != tc.field {
					t.Errorf("ApplyPatch = %v, want a problem of %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.WithDefaults().Outflow); diff != "" {
				t.Errorf("outflow (-want +got):\n%s", diff)
			}
			if o := got.Outflow; o.Rate == 0 && !strings.Contains(tc.patch, `"capacity":9`) && (o.Capacity != 0 || o.MinRate != 0) {
				t.Errorf("patched unlimited outflow before defaults = %+v, want the stale capacity and min_rate dropped by the patch", o)
			}
		})
	}
}

// TestStoredLegacyUnlimited: a spec stored before outflow.unlimited spelled
// an unlimited outflow "rate": 0; it still reads, as unlimited.
func TestStoredLegacyUnlimited(t *testing.T) {
	t.Parallel()
	got, err := decodeStored("acme", []byte(`{"outflow":{"adaptive":true,"capacity":0,"concurrency":0,"max_backlog":3,"min_rate":0,"rate":0},"on_limiter_error":"allow"}`))
	if err != nil {
		t.Fatal(err)
	}
	if o := got.WithDefaults().Outflow; !o.Unlimited || o.Rate != 0 || o.MaxBacklog != 3 {
		t.Errorf("legacy outflow = %+v, want unlimited with max_backlog 3", o)
	}
	if _, err := decodeStored("acme", []byte(`{"outflow":{"rate":0,"unlimited":true}}`)); err == nil {
		t.Errorf("a stored spec with rate 0 and unlimited was read; want the conflict refused")
	}
}

// TestValidateIgnoresOtherTenantsOwnProblems: a runtime spec stored by an
// older version that today's bounds refuse (gcra 2,000,000 per 1s) does not
// block writes of other tenants; a clash with this tenant still does.
func TestValidateIgnoresOtherTenantsOwnProblems(t *testing.T) {
	t.Parallel()
	base, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	key := config.HashKey("shared")
	legacy := config.Tenant{APIKeys: []string{key}, Admission: config.Admission{Algorithm: "gcra", Limit: 2_000_000}}.WithDefaults()
	ok := config.Tenant{Outflow: config.Outflow{Rate: 3}}.WithDefaults()
	cfg := Merge(base, []Record{{Tenant: "old", Spec: &legacy}, {Tenant: "acme", Spec: &ok}})
	if err := Validate(cfg, "acme"); err != nil {
		t.Errorf("Validate(acme) = %v, want nil: old's stored policy is not acme's problem", err)
	}
	if err := Validate(cfg, "old"); err == nil {
		t.Error("Validate(old) = nil, want old's admission.limit named")
	}
	clash := config.Tenant{APIKeys: []string{key}}.WithDefaults()
	cfg = Merge(base, []Record{{Tenant: "old", Spec: &legacy}, {Tenant: "acme", Spec: &clash}})
	se, isSE := IsSpecError(Validate(cfg, "acme"))
	if !isSE || len(se.Problems) != 1 || !strings.Contains(se.Problems[0].Msg, "same key as") {
		t.Errorf("Validate(acme with old's key) = %v, want the one key clash", se)
	}
}

// TestMergeCopiesTenantsOnlyOnChange: without a runtime spec or tombstone
// Merge shares the file's tenants map (a drainer of 10,000 tenants holds one
// map, not two); with one it works on a copy and leaves base as it was.
func TestMergeCopiesTenantsOnlyOnChange(t *testing.T) {
	base := &config.Config{Tenants: map[string]config.Tenant{"acme": {OnLimiterError: "allow"}}}
	same := Merge(base, []Record{{Tenant: "acme", Version: 3}})
	if reflect.ValueOf(same.Tenants).UnsafePointer() != reflect.ValueOf(base.Tenants).UnsafePointer() {
		t.Error("Merge without a change copied the tenants map")
	}
	spec := config.Tenant{OnLimiterError: "deny"}
	changed := Merge(base, []Record{{Tenant: "beta", Spec: &spec}, {Tenant: "acme", Deleted: true}})
	if _, ok := changed.Tenants["beta"]; !ok || len(changed.Tenants) != 1 {
		t.Errorf("merged tenants = %v, want beta only", changed.Tenants)
	}
	if _, ok := base.Tenants["acme"]; !ok || len(base.Tenants) != 1 {
		t.Errorf("Merge modified base: %v", base.Tenants)
	}
}
