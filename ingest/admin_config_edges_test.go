package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
)

// TestAdminRefusesOutflowBounds: an outflow the bucket script would refuse
// (capacity × 10^6 >= 2^53, a rate below MinOutflowRate, min_rate outside
// [0, rate]) is a 422 naming the field and the bound, through PUT and PATCH,
// and nothing is stored; the largest accepted capacity and rate are stored.
func TestAdminRefusesOutflowBounds(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML("acme", "    outflow: {rate: 5}\n")), nil)
	for _, c := range []struct{ name, outflow, field, detail string }{
		{"capacity the script refuses", `{"rate":2,"capacity":9007199255}`, "outflow.capacity",
			"tenants.%s.outflow.capacity: must be <= 1000000000 units, the most the outflow bucket holds exactly (got 9.007199255e+09)"},
		{"capacity 1e300", `{"rate":2,"capacity":1e300}`, "outflow.capacity", "outflow.capacity: must be <= 1000000000 units"},
		{"capacity just above the maximum", `{"rate":2,"capacity":1000000000.5}`, "outflow.capacity", "outflow.capacity: must be <= 1000000000 units"},
		{"rate 1e-320", `{"rate":1e-320}`, "outflow.rate", "outflow.rate: must be >= 0.001 units per second"},
		{"rate just below the minimum", `{"rate":0.000999}`, "outflow.rate", "outflow.rate: must be >= 0.001 units per second, one unit every 1000 s (got 0.000999); " + config.StopHint},
		{"min_rate above rate", `{"rate":2,"min_rate":3}`, "outflow.min_rate", "outflow.min_rate: must be between 0 and rate 2 units per second (got 3)"},
		{"min_rate negative", `{"rate":2,"min_rate":-1}`, "outflow.min_rate", "outflow.min_rate: must be between 0 and rate 2 units per second (got -1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, w := range []struct{ method, id string }{{http.MethodPut, "newco"}, {http.MethodPatch, "acme"}} {
				before := traceOf(t, rdb, w.id)
				a := h.admin(t, w.method, "/admin/v1/tenants/"+w.id, aliceToken, `{"outflow":`+c.outflow+`}`)
				if a.status != http.StatusUnprocessableEntity {
					t.Fatalf("%s: status %d, want 422: %s", w.method, a.status, a.body)
				}
				m := a.json(t)
				want := strings.ReplaceAll(c.detail, "%s", w.id)
				if detail, _ := m["detail"].(string); m["field"] != c.field || !strings.Contains(detail, want) {
					t.Errorf("%s: problem %s, want field %q and a detail containing %q", w.method, a.body, c.field, want)
				}
				if diff := cmp.Diff(before, traceOf(t, rdb, w.id)); diff != "" {
					t.Errorf("%s: a refused write changed Redis (-before +after):\n%s", w.method, diff)
				}
			}
		})
	}
	for _, ok := range []string{
		`{"outflow":{"rate":1000000,"capacity":1000000000,"min_rate":1000000}}`,
		`{"outflow":{"rate":0.001,"capacity":1000000000}}`,
	} {
		if a := h.admin(t, http.MethodPut, "/admin/v1/tenants/edge", aliceToken, ok); a.status != http.StatusOK && a.status != http.StatusCreated {
			t.Errorf("PUT %s: %d, want 200/201: %s", ok, a.status, a.body)
		}
	}
}

// TestAdminRefusesPeriodZero: a period or a target timeout spelled out as 0
// (or negative) is a 422 naming admission.period, target.timeout or its job
// type's, through PUT and PATCH, and nothing is stored; an absent period is
// still 1s.
func TestAdminRefusesPeriodZero(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML("acme", "    admission: {algorithm: gcra, limit: 10}\n")), nil)
	const period, timeout = "must be >= 1ms (got %s); leave it out for the default 1s", "must be above 0 (got %s); leave it out for the default 10s"
	for _, c := range []struct{ name, body, field, got, hint string }{
		{"tenant 0s", `{"admission":{"algorithm":"gcra","limit":10,"period":"0s"}}`, "admission.period", "0s", period},
		{"tenant -1s", `{"admission":{"algorithm":"gcra","limit":10,"period":"-1s"}}`, "admission.period", "-1s", period},
		{"job type 0s", `{"job_types":{"enc":{"admission":{"algorithm":"fixed_window","limit":3,"period":"0ms"}}}}`, "job_types.enc.admission.period", "0s", period},
		{"target timeout 0s", `{"target":{"url":"http://127.0.0.1:9/h","timeout":"0s"}}`, "target.timeout", "0s", timeout},
		{"job type target timeout -1s", `{"job_types":{"enc":{"target":{"url":"http://127.0.0.1:9/h","timeout":"-1s"}}}}`, "job_types.enc.target.timeout", "-1s", timeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, w := range []struct{ method, id string }{{http.MethodPut, "newco"}, {http.MethodPatch, "acme"}} {
				before := traceOf(t, rdb, w.id)
				a := h.admin(t, w.method, "/admin/v1/tenants/"+w.id, aliceToken, c.body)
				if a.status != http.StatusUnprocessableEntity {
					t.Fatalf("%s: status %d, want 422: %s", w.method, a.status, a.body)
				}
				m := a.json(t)
				want := "tenants." + w.id + "." + c.field + ": " + fmt.Sprintf(c.hint, c.got)
				if detail, _ := m["detail"].(string); m["field"] != c.field || !strings.Contains(detail, want) {
					t.Errorf("%s: problem %s, want field %q and a detail containing %q", w.method, a.body, c.field, want)
				}
				if diff := cmp.Diff(before, traceOf(t, rdb, w.id)); diff != "" {
					t.Errorf("%s: a refused write changed Redis (-before +after):\n%s", w.method, diff)
				}
			}
		})
	}
	a := h.admin(t, http.MethodPut, "/admin/v1/tenants/newco", aliceToken, `{"admission":{"algorithm":"gcra","limit":10}}`)
	if a.status != http.StatusCreated {
		t.Fatalf("PUT without a period: %d %s", a.status, a.body)
	}
	if p := specNumber(decodeTenant(t, a).Spec, "admission.period"); p != "1s" {
		t.Errorf("period of a PUT without one = %v, want the default 1s", p)
	}
}

// TestAdminPatchRateNullIsUnlimited: {"outflow":{"rate":null}} makes the
// tenant unlimited as {"outflow":{"unlimited":true}} does, and drops the
// bucket's capacity and min_rate; the override fields are gone.
func TestAdminPatchRateNullIsUnlimited(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML("acme", "    outflow: {rate: 2, capacity: 2, min_rate: 0.2, max_backlog: 9}\n")), nil)
	for _, patch := range []string{`{"outflow":{"rate":null}}`, `{"outflow":{"rate":3,"capacity":4,"min_rate":0.5}}`, `{"outflow":{"unlimited":true}}`} {
		a := h.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, patch)
		if a.status != http.StatusOK {
			t.Fatalf("PATCH %s: %d %s", patch, a.status, a.body)
		}
		o, _ := decodeTenant(t, a).Spec["outflow"].(map[string]any)
		if strings.Contains(patch, `"rate":3`) {
			continue // shaped again in between
		}
		want := map[string]any{"unlimited": true, "capacity": 0.0, "min_rate": 0.0, "max_backlog": 9.0, "adaptive": true, "concurrency": 0.0, "paused": false}
		if diff := cmp.Diff(want, o); diff != "" {
			t.Errorf("outflow after PATCH %s (-want +got):\n%s", patch, diff)
		}
		ov := traceOf(t, rdb, "acme").Override
		if ov["outflow_rate"] != "" || ov["outflow_capacity"] != "" {
			t.Errorf("override after PATCH %s: %v, want no outflow_rate or outflow_capacity", patch, ov)
		}
	}
	// A PUT of an unlimited outflow with a capacity keeps none of it.
	a := h.admin(t, http.MethodPut, "/admin/v1/tenants/newco", aliceToken, `{"outflow":{"unlimited":true,"capacity":5,"min_rate":1}}`)
	if a.status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", a.status, a.body)
	}
	if o := decodeTenant(t, a).Spec["outflow"].(map[string]any); o["capacity"] != 0.0 || o["min_rate"] != 0.0 {
		t.Errorf("unlimited outflow after PUT with a capacity = %v, want capacity 0 and min_rate 0", o)
	}
}

// TestAdminProblemOrderIsStable: a spec with two problems names the same
// first field every time (config.Validate walks tenants and job types in
// order).
func TestAdminProblemOrderIsStable(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML("acme", "")), nil)
	body := `{"job_types":{"zeta":{"admission":{"algorithm":"gcra","limit":0}},"alpha":{"admission":{"algorithm":"gcra","limit":0}}}}`
	for i := range 20 {
		for _, w := range []struct{ method, id string }{{http.MethodPut, "newco"}, {http.MethodPatch, "acme"}} {
			a := h.admin(t, w.method, "/admin/v1/tenants/"+w.id, aliceToken, body)
			m := a.json(t)
			detail, _ := m["detail"].(string)
			if a.status != http.StatusUnprocessableEntity || m["field"] != "job_types.alpha.admission.limit" ||
				!strings.Contains(detail, "job_types.zeta.admission.limit") {
				t.Fatalf("try %d, %s: %d %s; want 422 naming job_types.alpha.admission.limit first and zeta too", i, w.method, a.status, a.body)
			}
		}
	}
}

// TestAdminWriteThatChangesNothing: a PATCH or PUT whose result is the
// tenant's current spec is answered 200 with that spec and version and
// writes nothing: no version bump, no audit entry, no announcement.
func TestAdminWriteThatChangesNothing(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	h := startAdminIngest(t, rdb, adminConfig(t,
		tenantYAML("acme", "    outflow: {rate: 5}\n"),
		tenantYAML("plain", "")), nil)
	ctx := context.Background()
	sub := rdb.Subscribe(ctx, keys.TenantsChannel())
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		t.Fatal(err)
	}
	globalVersion := func() string { return rdb.Get(ctx, keys.TenantsVersion()).Val() }

	// acme becomes a runtime tenant first (one real write, announced).
	if a := h.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, `{"outflow":{"rate":6}}`); a.status != http.StatusOK {
		t.Fatalf("patch acme: %d %s", a.status, a.body)
	}
	if msg, err := sub.ReceiveMessage(ctx); err != nil || !strings.HasPrefix(msg.Payload, "acme ") {
		t.Fatalf("announcement of the real write: %v, %v", msg, err)
	}
	acme := h.admin(t, http.MethodGet, "/admin/v1/tenants/acme", aliceToken, "")
	cur := decodeTenant(t, acme)
	for _, c := range []struct{ name, method, id, body string }{
		{"empty patch of a runtime tenant", http.MethodPatch, "acme", `{}`},
		{"patch setting the current rate", http.MethodPatch, "acme", `{"outflow":{"rate":6}}`},
		{"put of the current spec", http.MethodPut, "acme", ""},
		{"empty patch of a file tenant", http.MethodPatch, "plain", `{}`},
		{"outflow null on a tenant without outflow", http.MethodPatch, "plain", `{"outflow":null}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := c.body
			want := decodeTenant(t, h.admin(t, http.MethodGet, "/admin/v1/tenants/"+c.id, aliceToken, ""))
			if c.method == http.MethodPut {
				b, _ := json.Marshal(cur.Spec)
				body = string(b)
			}
			before, gv := traceOf(t, rdb, c.id), globalVersion()
			a := h.admin(t, c.method, "/admin/v1/tenants/"+c.id, aliceToken, body)
			if a.status != http.StatusOK {
				t.Fatalf("status %d, want 200: %s", a.status, a.body)
			}
			if diff := cmp.Diff(want, decodeTenant(t, a)); diff != "" {
				t.Errorf("answer (-current +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, traceOf(t, rdb, c.id)); diff != "" {
				t.Errorf("a write that changes nothing changed Redis (-before +after):\n%s", diff)
			}
			if g := globalVersion(); g != gv {
				t.Errorf("global version %s → %s, want unchanged", gv, g)
			}
		})
	}
	// The next announcement is the next real write's: none came from the
	// writes above.
	if a := h.admin(t, http.MethodPatch, "/admin/v1/tenants/plain", aliceToken, `{"outflow":{"rate":1}}`); a.status != http.StatusOK {
		t.Fatalf("patch plain: %d %s", a.status, a.body)
	}
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "plain 1" {
		t.Errorf("next announcement = %v, %v; want the real write's, \"plain 1\"", msg, err)
	}
}
