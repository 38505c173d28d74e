package ingest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
)

// tenantTrace is what an admin write leaves in Redis for one tenant.
type tenantTrace struct {
	Override map[string]string
	Audit    int64
	Listed   bool
}

func traceOf(t *testing.T, rdb *redis.Client, id string) tenantTrace {
	t.Helper()
	ctx := context.Background()
	ov, err := rdb.HGetAll(ctx, keys.Override(id)).Result()
	if err != nil {
		t.Fatal(err)
	}
	n, err := rdb.LLen(ctx, keys.Audit(id)).Result()
	if err != nil {
		t.Fatal(err)
	}
	listed, err := rdb.SIsMember(ctx, keys.Tenants(), id).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tenantTrace{Override: ov, Audit: n, Listed: listed}
}

// TestAdminRefusesPolicyBounds: the seven admin changes of issue 7 that were
// stored with 200/201 and then broke their tenant are each a 422 naming the
// field and the bound, through PUT and PATCH alike, and nothing is stored.
func TestAdminRefusesPolicyBounds(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	cfg := adminConfig(t, tenantYAML("acme", "    admission: {algorithm: gcra, limit: 10, burst: 5}\n    outflow: {rate: 5}\n"))
	h := startAdminIngest(t, rdb, cfg, nil)
	// acme gets a runtime spec first, so a refused PATCH has an override
	// and an audit entry to leave unchanged.
	if a := h.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, `{"outflow":{"rate":6}}`); a.status != http.StatusOK {
		t.Fatalf("patch acme: %d %s", a.status, a.body)
	}
	for _, c := range []struct {
		name, admission, field, detail string
	}{
		{"gcra 2,000,000 per 1s", `{"algorithm":"gcra","limit":2000000,"period":"1s"}`,
			"admission.limit", "tenants.%s.admission.limit: must be <= 1000000, one unit per µs of period 1s (got 2000000)"},
		{"limit 2^63-1", `{"algorithm":"fixed_window","limit":9223372036854775807,"period":"1s"}`,
			"admission.limit", "admission.limit: must be <= 1000000, one unit per µs of period 1s (got 9223372036854775807)"},
		{"burst 2^63-1", `{"algorithm":"gcra","limit":10,"period":"1s","burst":9223372036854775807}`,
			"admission.burst", "admission.burst: must be <= 9007199254: burst × period (1000000 µs) must stay below 2^53 (got 9223372036854775807)"},
		{"token bucket 2^53+1", `{"algorithm":"token_bucket","limit":9007199254740993,"period":"1s"}`,
			"admission.limit", "admission.limit: must be <= 1000000, one unit per µs of period 1s (got 9007199254740993)"},
		{"token bucket burst 2^53+1", `{"algorithm":"token_bucket","limit":1,"period":"1s","burst":9007199254740993}`,
			"admission.burst", "admission.burst: must be <= 9007199254: burst × period"},
		{"period 2562047h", `{"algorithm":"gcra","limit":10,"period":"2562047h"}`,
			"admission.period", "admission.period: must be <= 8784h0m0s (366 days) (got 2562047h0m0s)"},
		{"sliding log 2^40 per 1h", `{"algorithm":"sliding_log","limit":1099511627776,"period":"1h"}`,
			"admission.limit", "admission.limit: must be <= 3600000000, one unit per µs of period 1h0m0s (got 1099511627776)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			check := func(t *testing.T, id string, a answer) {
				t.Helper()
				if a.status != http.StatusUnprocessableEntity {
					t.Fatalf("status %d, want 422: %s", a.status, a.body)
				}
				m := a.json(t)
				detail, _ := m["detail"].(string)
				want := c.detail
				if strings.Contains(want, "%s") {
					want = strings.ReplaceAll(want, "%s", id)
				}
				if m["field"] != c.field || !strings.Contains(detail, want) {
					t.Errorf("problem %s, want field %q and a detail containing %q", a.body, c.field, want)
				}
			}
			t.Run("put", func(t *testing.T) {
				before := traceOf(t, rdb, "newco")
				check(t, "newco", h.admin(t, http.MethodPut, "/admin/v1/tenants/newco", aliceToken, `{"admission":`+c.admission+`}`))
				if diff := cmp.Diff(before, traceOf(t, rdb, "newco")); diff != "" {
					t.Errorf("a refused PUT changed Redis (-before +after):\n%s", diff)
				}
			})
			t.Run("patch", func(t *testing.T) {
				before := traceOf(t, rdb, "acme")
				check(t, "acme", h.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, `{"admission":`+c.admission+`}`))
				if diff := cmp.Diff(before, traceOf(t, rdb, "acme")); diff != "" {
					t.Errorf("a refused PATCH changed Redis (-before +after):\n%s", diff)
				}
			})
		})
	}
	// The largest accepted value of the same bound is stored (201).
	if a := h.admin(t, http.MethodPut, "/admin/v1/tenants/edge", aliceToken, `{"admission":{"algorithm":"gcra","limit":1000000,"period":"1s"}}`); a.status != http.StatusCreated {
		t.Errorf("gcra 1,000,000 per 1s: %d, want 201: %s", a.status, a.body)
	}
}

// TestAdminRefusesReservedIDs: ".", ".." and ids starting with "_" are not
// tenant ids; a PUT of one is a 422 naming the id and the rule, and nothing
// is stored.
func TestAdminRefusesReservedIDs(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML("acme", "")), nil)
	for _, c := range []struct{ path, id string }{
		{"/admin/v1/tenants/%2e%2e", ".."},
		{"/admin/v1/tenants/%2e", "."},
		{"/admin/v1/tenants/_other", "_other"},
		{"/admin/v1/tenants/_x", "_x"},
	} {
		t.Run(c.id, func(t *testing.T) {
			before := traceOf(t, rdb, c.id)
			a := h.admin(t, http.MethodPut, c.path, aliceToken, `{}`)
			if a.status != http.StatusUnprocessableEntity {
				t.Fatalf("PUT %s: %d, want 422: %s", c.path, a.status, a.body)
			}
			m := a.json(t)
			if detail, _ := m["detail"].(string); m["field"] != "id" || !strings.Contains(detail, `not "." or "..", not starting with "_"`) || !strings.Contains(detail, `(got "`+c.id+`")`) {
				t.Errorf("problem %s, want field id, the rule and the id", a.body)
			}
			if a.header.Get("Location") != "" {
				t.Errorf("Location %q on a refused PUT", a.header.Get("Location"))
			}
			if diff := cmp.Diff(before, traceOf(t, rdb, c.id)); diff != "" {
				t.Errorf("a refused PUT changed Redis (-before +after):\n%s", diff)
			}
			if a := h.admin(t, http.MethodGet, c.path, aliceToken, ""); a.status == http.StatusOK {
				t.Errorf("GET %s after the refused PUT: 200 %s", c.path, a.body)
			}
		})
	}
}

// TestJobDotIDsRefused: "." and ".." are not job ids or job types (they are
// URL path segments: /v1/jobs/{id}); a job carrying one is a 422 naming the
// field and the rule, and nothing is queued or counted.
func TestJobDotIDsRefused(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	tenant := "dots"
	h := startIngest(t, testConfig(t, tenantYAML(tenant, "")), deps{rdb: rdb})
	ctx := context.Background()
	for _, c := range []struct{ name, path, body, field string }{
		{"id ..", "/v1/jobs", `{"type":"t","id":".."}`, "id"},
		{"id .", "/v1/jobs", `{"type":"t","id":"."}`, "id"},
		{"type ..", "/v1/jobs", `{"type":".."}`, "type"},
		{"batch id ..", "/v1/jobs:batch", `{"jobs":[{"type":"t"},{"type":"t","id":".."}]}`, "jobs[1].id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := h.post(t, tenant, c.path, c.body)
			if a.status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", a.status, a.body)
			}
			m := a.json(t)
			if detail, _ := m["detail"].(string); m["field"] != c.field || !strings.Contains(detail, `not "." or ".."`) {
				t.Errorf("problem %s, want field %q and the rule", a.body, c.field)
			}
			n, err := rdb.Exists(ctx, keys.Queue(tenant), keys.Backlog(tenant)).Result()
			if err != nil || n != 0 {
				t.Errorf("queue and backlog keys: %d exist (err %v), want none", n, err)
			}
		})
	}
}

// TestAdminOutflowRate: an outflow rate of 0 (or out of bounds) through PUT
// or PATCH is a 422 naming outflow.rate that says how to stop delivery
// instead, and nothing is stored; unlimited is spelled out, and a PATCH of
// unlimited or of a rate switches between the two, the drainers' override
// field following.
func TestAdminOutflowRate(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML("acme", "    outflow: {rate: 5}\n")), nil)
	for _, c := range []struct{ name, method, id, body, field, detail string }{
		{"put rate 0", http.MethodPut, "newco", `{"outflow":{"rate":0}}`, "outflow.rate",
			"tenants.newco.outflow.rate: must be > 0 units per second (got 0); " + config.StopHint},
		{"patch rate 0", http.MethodPatch, "acme", `{"outflow":{"rate":0}}`, "outflow.rate",
			"tenants.acme.outflow.rate: must be > 0 units per second (got 0); " + config.StopHint},
		{"patch rate -3", http.MethodPatch, "acme", `{"outflow":{"rate":-3}}`, "outflow.rate", "must be > 0 units per second (got -3)"},
		{"put rate above the maximum", http.MethodPut, "newco", `{"outflow":{"rate":1000001}}`, "outflow.rate", "must be <= 1000000 units per second"},
		{"put rate not finite", http.MethodPut, "newco", `{"outflow":{"rate":1e999}}`, "outflow.rate", "must be a finite number"},
		{"put unlimited with a rate", http.MethodPut, "newco", `{"outflow":{"rate":2,"unlimited":true}}`, "outflow.unlimited", "true excludes a rate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := traceOf(t, rdb, c.id)
			a := h.admin(t, c.method, "/admin/v1/tenants/"+c.id, aliceToken, c.body)
			if a.status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", a.status, a.body)
			}
			m := a.json(t)
			if detail, _ := m["detail"].(string); m["field"] != c.field || !strings.Contains(detail, c.detail) {
				t.Errorf("problem %s, want field %q and a detail containing %q", a.body, c.field, c.detail)
			}
			if diff := cmp.Diff(before, traceOf(t, rdb, c.id)); diff != "" {
				t.Errorf("a refused write changed Redis (-before +after):\n%s", diff)
			}
		})
	}

	a := h.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, `{"outflow":{"unlimited":true}}`)
	if a.status != http.StatusOK {
		t.Fatalf("patch unlimited: %d %s", a.status, a.body)
	}
	o, _ := decodeTenant(t, a).Spec["outflow"].(map[string]any)
	if _, hasRate := o["rate"]; o["unlimited"] != true || hasRate {
		t.Errorf("after patching unlimited: outflow %v, want unlimited without a rate", o)
	}
	if ov := traceOf(t, rdb, "acme").Override; ov["outflow_rate"] != "" {
		t.Errorf("override outflow_rate = %q for an unlimited tenant, want none", ov["outflow_rate"])
	}
	a = h.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, `{"outflow":{"rate":2}}`)
	if a.status != http.StatusOK {
		t.Fatalf("patch rate 2: %d %s", a.status, a.body)
	}
	o, _ = decodeTenant(t, a).Spec["outflow"].(map[string]any)
	if _, unl := o["unlimited"]; o["rate"] != 2.0 || unl {
		t.Errorf("after patching rate 2: outflow %v, want rate 2 and no unlimited", o)
	}
	if ov := traceOf(t, rdb, "acme").Override; ov["outflow_rate"] != "2" {
		t.Errorf("override outflow_rate = %q, want 2", ov["outflow_rate"])
	}
}
