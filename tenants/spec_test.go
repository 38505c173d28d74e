package tenants

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
)

// fullTenant uses every field of config.Tenant.
func fullTenant() config.Tenant {
	on := true
	return config.Tenant{
		APIKeys:   []string{config.HashKey("k1")},
		Admission: config.Admission{Algorithm: "gcra", Limit: 10, Period: time.Second, Burst: 5},
		JobTypes: map[string]config.JobType{
			"encode": {
				Admission: config.Admission{Algorithm: "fixed_window", Limit: 2, Period: time.Minute, Burst: 2},
				Target:    config.Target{URL: "http://127.0.0.1:9000/encode", Timeout: 30 * time.Second},
			},
			"mail": {Target: config.Target{Timeout: 10 * time.Second}},
		},
		Outflow:        config.Outflow{Rate: 5, Capacity: 5, MaxBacklog: 10000, Concurrency: 3, Adaptive: &on, MinRate: 0.5},
		Target:         config.Target{URL: "http://127.0.0.1:9000/hook", Timeout: 10 * time.Second},
		OnLimiterError: "deny",
	}
}

func TestSpecRoundTrip(t *testing.T) {
	t.Parallel()
	off := false
	for _, tc := range []struct {
		name string
		in   config.Tenant
	}{
		{"full", fullTenant()},
		{"empty", config.Tenant{}},
		{"defaults", config.Tenant{Admission: config.Admission{Algorithm: "gcra", Limit: 3}}.WithDefaults()},
		{"adaptive off, unlimited", config.Tenant{Outflow: config.Outflow{Adaptive: &off}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeSpec(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeSpec("acme", b)
			if err != nil {
				t.Fatalf("DecodeSpec(%s): %v", b, err)
			}
			if diff := cmp.Diff(tc.in, got, cmp.Comparer(func(a, b []string) bool { return len(a) == len(b) && (len(a) == 0 || cmp.Equal(a, b)) })); diff != "" {
				t.Errorf("round trip of %s (-want +got):\n%s", b, diff)
			}
		})
	}
}

// TestEncodeSpecShape pins the JSON the admin API shows: YAML names,
// duration strings, all-zero policies left out.
func TestEncodeSpecShape(t *testing.T) {
	t.Parallel()
	tn := fullTenant()
	tn.JobTypes = map[string]config.JobType{"mail": {Target: config.Target{Timeout: 10 * time.Second}}}
	b, err := EncodeSpec(tn)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"admission":{"algorithm":"gcra","burst":5,"limit":10,"period":"1s"},` +
		`"api_keys":["` + config.HashKey("k1") + `"],` +
		`"job_types":{"mail":{"target":{"timeout":"10s","url":""}}},` +
		`"on_limiter_error":"deny",` +
		`"outflow":{"adaptive":true,"capacity":5,"concurrency":3,"max_backlog":10000,"min_rate":0.5,"paused":false,"rate":5},` +
		`"target":{"timeout":"10s","url":"http://127.0.0.1:9000/hook"}}`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("EncodeSpec (-want +got):\n%s", diff)
	}
}

func TestDecodeSpecProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, json string
		want       []FieldError
	}{
		{"unknown field", `{"outflow":{"rte":1}}`, []FieldError{{Field: "outflow.rte", Key: "tenants.acme.outflow.rte", Msg: "unknown field"}}},
		{"unknown top field", `{"limit":1}`, []FieldError{{Field: "limit", Key: "tenants.acme.limit", Msg: "unknown field"}}},
		{"duration without unit", `{"admission":{"period":5}}`, []FieldError{{Field: "admission.period", Key: "tenants.acme.admission.period",
			Msg: `a duration is a string with a unit, e.g. "1s" or "250ms" (got 5)`}}},
		{"fractional integer", `{"admission":{"limit":1.5}}`, []FieldError{{Field: "admission.limit", Key: "tenants.acme.admission.limit",
			Msg: `cannot parse value as 'int64': strconv.ParseInt: parsing "1.5": invalid syntax`}}},
		{"string for a number", `{"outflow":{"rate":"5"}}`, []FieldError{{Field: "outflow.rate", Key: "tenants.acme.outflow.rate",
			Msg: "expected type 'float64', got unconvertible type 'string'"}}},
		{"job type field", `{"job_types":{"encode":{"admission":{"limt":1}}}}`, []FieldError{{Field: "job_types.encode.admission.limt",
			Key: "tenants.acme.job_types.encode.admission.limt", Msg: "unknown field"}}},
		{"key index", `{"api_keys":[true]}`, []FieldError{{Field: "api_keys[0]", Key: "tenants.acme.api_keys[0]",
			Msg: "expected type 'string', got unconvertible type 'bool'"}}},
		{"not an object", `[1]`, []FieldError{{Key: "tenants.acme", Msg: "must be a JSON object"}}},
		{"two values", `{} {}`, []FieldError{{Key: "tenants.acme", Msg: "more than one JSON value"}}},
		// Strict names (issue 7): exact case, each key once, at any depth.
		{"other case", `{"Outflow":{"rate":1}}`, []FieldError{{Field: "Outflow", Key: "tenants.acme.Outflow", Msg: "unknown field"}}},
		{"other case inside", `{"outflow":{"Rate":1}}`, []FieldError{{Field: "outflow.Rate", Key: "tenants.acme.outflow.Rate", Msg: "unknown field"}}},
		{"repeated", `{"outflow":{"rate":-1,"rate":1}}`, []FieldError{{Field: "outflow.rate", Key: "tenants.acme.outflow.rate", Msg: "given more than once"}}},
		{"repeated top", `{"target":{},"target":{}}`, []FieldError{{Field: "target", Key: "tenants.acme.target", Msg: "given more than once"}}},
		{"repeated job type", `{"job_types":{"a":{},"a":{}}}`, []FieldError{{Field: "job_types.a", Key: "tenants.acme.job_types.a", Msg: "given more than once"}}},
		{"job type case", `{"job_types":{"a":{"Target":{}}}}`, []FieldError{{Field: "job_types.a.Target", Key: "tenants.acme.job_types.a.Target", Msg: "unknown field"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSpec("acme", []byte(tc.json))
			se, ok := IsSpecError(err)
			if !ok {
				t.Fatalf("DecodeSpec(%s) = %v, want a *SpecError", tc.json, err)
			}
			if diff := cmp.Diff(tc.want, se.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMergePatchRFC7396 runs the examples of RFC 7396 Appendix A.
func TestMergePatchRFC7396(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	} {
		var target, patch any
		if err := json.Unmarshal([]byte(tc.target), &target); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tc.patch), &patch); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(mergePatch(target, patch))
		if string(got) != tc.want {
			t.Errorf("MergePatch(%s, %s) = %s, want %s", tc.target, tc.patch, got, tc.want)
		}
	}
}

func TestApplyPatch(t *testing.T) {
	t.Parallel()
	cur := fullTenant()
	for _, tc := range []struct {
		name, patch string
		want        func(*config.Tenant)
	}{
		// fullTenant's capacity 5 and min_rate 0.5 are rate 5's defaults:
		// they follow the new rate (left out, defaults applied later).
		{"outflow rate: defaulted capacity and min_rate follow", `{"outflow":{"rate":20}}`, func(t *config.Tenant) {
			t.Outflow.Rate, t.Outflow.Capacity, t.Outflow.MinRate = 20, 0, 0
		}},
		{"outflow rate with its own capacity", `{"outflow":{"rate":0.1,"capacity":5}}`, func(t *config.Tenant) {
			t.Outflow.Rate, t.Outflow.MinRate = 0.1, 0
		}},
		{"admission limit: burst 5 set on purpose stays", `{"admission":{"limit":3}}`, func(t *config.Tenant) { t.Admission.Limit = 3 }},
		{"job type limit: defaulted burst follows", `{"job_types":{"encode":{"admission":{"limit":7}}}}`, func(t *config.Tenant) {
			jt := t.JobTypes["encode"]
			jt.Admission.Limit, jt.Admission.Burst = 7, 0
			t.JobTypes["encode"] = jt
		}},
		{"admission limit and period", `{"admission":{"limit":100,"period":"1m"}}`, func(t *config.Tenant) {
			t.Admission.Limit, t.Admission.Period = 100, time.Minute
		}},
		{"null removes: capacity back to its default later", `{"outflow":{"capacity":null}}`, func(t *config.Tenant) { t.Outflow.Capacity = 0 }},
		{"null removes a job type", `{"job_types":{"mail":null}}`, func(t *config.Tenant) { delete(t.JobTypes, "mail") }},
		{"arrays are replaced", `{"api_keys":["` + config.HashKey("k2") + `"]}`, func(t *config.Tenant) { t.APIKeys = []string{config.HashKey("k2")} }},
		{"empty patch", `{}`, func(t *config.Tenant) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := fullTenant()
			want.JobTypes = map[string]config.JobType{}
			for k, v := range fullTenant().JobTypes {
				want.JobTypes[k] = v
			}
			tc.want(&want)
			got, err := ApplyPatch("acme", cur, []byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ApplyPatch(%s) (-want +got):\n%s", tc.patch, diff)
			}
		})
	}
	if diff := cmp.Diff(fullTenant(), cur); diff != "" {
		t.Errorf("ApplyPatch modified its input (-before +after):\n%s", diff)
	}
	if _, err := ApplyPatch("acme", cur, []byte(`{"outflow":{"rate":"fast"}}`)); err == nil {
		t.Error("a patch with a string rate gave no error")
	}
	if _, err := ApplyPatch("acme", cur, []byte(`not json`)); err == nil {
		t.Error("a patch that is not JSON gave no error")
	}
	// The patch's own names are strict: another case is not merged as a
	// second member mapstructure would match, a repeat is not "the last".
	for patch, want := range map[string]FieldError{
		`{"Outflow":{"rate":1}}`:              {Field: "Outflow", Key: "tenants.acme.Outflow", Msg: "unknown field"},
		`{"outflow":{"rate":1,"rate":2}}`:     {Field: "outflow.rate", Key: "tenants.acme.outflow.rate", Msg: "given more than once"},
		`{"outflow":null,"outflow":{}}`:       {Field: "outflow", Key: "tenants.acme.outflow", Msg: "given more than once"},
		`{"job_types":{"mail":{"TARGET":1}}}`: {Field: "job_types.mail.TARGET", Key: "tenants.acme.job_types.mail.TARGET", Msg: "unknown field"},
	} {
		_, err := ApplyPatch("acme", cur, []byte(patch))
		se, ok := IsSpecError(err)
		if !ok {
			t.Errorf("ApplyPatch(%s) = %v, want a *SpecError", patch, err)
			continue
		}
		if diff := cmp.Diff([]FieldError{want}, se.Problems); diff != "" {
			t.Errorf("ApplyPatch(%s) problems (-want +got):\n%s", patch, diff)
		}
	}
}

func TestValidateNamesFields(t *testing.T) {
	t.Parallel()
	base := &config.Config{}
	cfg, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	*base = *cfg
	key := config.HashKey("shared")
	base.Tenants = map[string]config.Tenant{"other": config.Tenant{APIKeys: []string{key}}.WithDefaults()}
	bad := config.Tenant{APIKeys: []string{key}, Outflow: config.Outflow{Rate: -1, MinRate: -1}, Admission: config.Admission{Algorithm: "gcra"}}.WithDefaults()
	err = Validate(Merge(base, []Record{{Tenant: "acme", Spec: &bad}}), "acme")
	se, ok := IsSpecError(err)
	if !ok {
		t.Fatalf("Validate = %v, want a *SpecError", err)
	}
	var fields []string
	for _, p := range se.Problems {
		fields = append(fields, p.Field)
	}
	// The duplicate key is reported on whichever tenant config.Validate
	// meets second, so only this tenant's own fields are pinned.
	for _, want := range []string{"admission.limit", "outflow.min_rate", "outflow.rate"} {
		found := false
		for _, f := range fields {
			found = found || f == want
		}
		if !found {
			t.Errorf("problems %v do not name %s", se.Problems, want)
		}
	}
	idx := map[string]int{}
	for i, p := range se.Problems {
		idx[p.Field] = i
		if p.Field == "admission.limit" && (p.Key != "tenants.acme.admission.limit" || p.Msg != "must be >= 1 (got 0)") {
			t.Errorf("admission.limit problem = %+v", p)
		}
	}
	if idx["outflow.rate"] > idx["outflow.min_rate"] {
		t.Errorf("problems %v: outflow.rate should come before the min_rate derived from it", se.Problems)
	}
}
