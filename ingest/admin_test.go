package ingest_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
)

// tenantAnswer is an admin answer about one tenant.
type tenantAnswer struct {
	ID      string         `json:"id"`
	Source  string         `json:"source"`
	Spec    map[string]any `json:"spec"`
	Version int64          `json:"version"`
}

func decodeTenant(t testing.TB, a answer) tenantAnswer {
	t.Helper()
	var ta tenantAnswer
	if err := json.Unmarshal(a.body, &ta); err != nil {
		t.Fatalf("answer is not a tenant: %v: %s", err, a.body)
	}
	return ta
}

// specNumber reads a number at a dotted path of a spec.
func specNumber(spec map[string]any, path string) any {
	var cur any = spec
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func TestAdminAuth(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	tenant := "acme"
	cfg := adminConfig(t, tenantYAML(tenant, "    outflow: {rate: 5}\n"))
	h := startAdminIngest(t, rdb, cfg, nil)
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "nope", http.StatusUnauthorized},
		{"tenant key", apiKey(tenant), http.StatusUnauthorized},
		{"admin token twice", aliceToken + "\n" + aliceToken, http.StatusUnauthorized},
		{"admin", aliceToken, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := h.admin(t, http.MethodGet, "/admin/v1/tenants", tc.token, "")
			if a.status != tc.want {
				t.Fatalf("status %d, want %d: %s", a.status, tc.want, a.body)
			}
			if tc.want == http.StatusUnauthorized {
				if a.header.Get("WWW-Authenticate") == "" || a.header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("401 headers %v, want WWW-Authenticate and problem+json", a.header)
				}
				if !strings.Contains(string(a.body), "missing, repeated or unknown admin token") {
					t.Errorf("401 body %s does not say the same thing for every bad token", a.body)
				}
			}
		})
	}

	// Without admin tokens the admin API does not exist.
	h.srv.SetConfig(testConfig(t, tenantYAML(tenant, "")))
	if a := h.admin(t, http.MethodGet, "/admin/v1/tenants", aliceToken, ""); a.status != http.StatusNotFound {
		t.Errorf("no admin tokens: status %d, want 404: %s", a.status, a.body)
	}
	// Nor without a registry.
	plain := startIngest(t, adminConfig(t, tenantYAML(tenant, "")), deps{rdb: rdb})
	if a := plain.request(t, http.MethodGet, "/admin/v1/tenants", aliceToken, "", ""); a.status != http.StatusNotFound {
		t.Errorf("no registry: status %d, want 404: %s", a.status, a.body)
	}
}

// TestAdminRoutes walks every route and status of the admin API.
func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	cfg := adminConfig(t, tenantYAML("acme", "    admission: {algorithm: gcra, limit: 10, burst: 5}\n    outflow: {rate: 5}\n"))
	h := startAdminIngest(t, rdb, cfg, nil)
	key := config.HashKey("key-new")

	type step struct {
		name, method, path, token, body string
		status                          int
		check                           func(t *testing.T, a answer)
	}
	problemField := func(field, detail string) func(*testing.T, answer) {
		return func(t *testing.T, a answer) {
			m := a.json(t)
			if m["field"] != field || !strings.Contains(m["detail"].(string), detail) {
				t.Errorf("problem %s, want field %q and a detail containing %q", a.body, field, detail)
			}
		}
	}
	steps := []step{
		{"list file tenants", "GET", "/admin/v1/tenants", aliceToken, "", 200, func(t *testing.T, a answer) {
			var got struct{ Tenants []tenantAnswer }
			if err := json.Unmarshal(a.body, &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Tenants) != 1 || got.Tenants[0].ID != "acme" || got.Tenants[0].Source != "config" || got.Tenants[0].Version != 0 {
				t.Errorf("list = %s, want acme from config", a.body)
			}
		}},
		{"get file tenant", "GET", "/admin/v1/tenants/acme", aliceToken, "", 200, func(t *testing.T, a answer) {
			ta := decodeTenant(t, a)
			if ta.Source != "config" || specNumber(ta.Spec, "outflow.rate") != 5.0 || specNumber(ta.Spec, "admission.period") != "1s" {
				t.Errorf("acme = %s", a.body)
			}
		}},
		{"get unknown", "GET", "/admin/v1/tenants/nope", aliceToken, "", 404, nil},
		{"put creates", "PUT", "/admin/v1/tenants/newco", aliceToken,
			`{"api_keys":["` + key + `"],"admission":{"algorithm":"fixed_window","limit":3,"period":"1m"},"outflow":{"rate":2}}`, 201,
			func(t *testing.T, a answer) {
				ta := decodeTenant(t, a)
				if ta.ID != "newco" || ta.Source != "runtime" || ta.Version != 1 || a.header.Get("Location") != "/admin/v1/tenants/newco" {
					t.Errorf("created = %s (Location %q)", a.body, a.header.Get("Location"))
				}
				// Defaults are applied and shown.
				if specNumber(ta.Spec, "outflow.capacity") != 2.0 || specNumber(ta.Spec, "admission.burst") != 3.0 || specNumber(ta.Spec, "on_limiter_error") != "allow" {
					t.Errorf("created spec lacks its defaults: %s", a.body)
				}
			}},
		{"put replaces", "PUT", "/admin/v1/tenants/newco", bobToken, `{"api_keys":["` + key + `"],"outflow":{"rate":4}}`, 200,
			func(t *testing.T, a answer) {
				ta := decodeTenant(t, a)
				if ta.Version != 2 || specNumber(ta.Spec, "outflow.rate") != 4.0 || ta.Spec["admission"] != nil {
					t.Errorf("replaced = %s, want version 2, rate 4, no admission", a.body)
				}
			}},
		{"put invalid value", "PUT", "/admin/v1/tenants/newco", aliceToken, `{"outflow":{"rate":-1}}`, 422,
			problemField("outflow.rate", "tenants.newco.outflow.rate: must be > 0 units per second (got -1); to stop delivery, pause the tenant")},
		{"put unknown field", "PUT", "/admin/v1/tenants/newco", aliceToken, `{"outflow":{"rte":1}}`, 422,
			problemField("outflow.rte", "tenants.newco.outflow.rte: unknown field")},
		{"put duration without unit", "PUT", "/admin/v1/tenants/newco", aliceToken, `{"target":{"timeout":10}}`, 422,
			problemField("target.timeout", "a duration is a string with a unit")},
		{"put another tenant's key", "PUT", "/admin/v1/tenants/other", aliceToken, `{"api_keys":["` + key + `"]}`, 422,
			func(t *testing.T, a answer) {
				// config.Validate reports the clash on whichever of the two
				// tenants it meets second.
				m := a.json(t)
				f := m["field"]
				if (f != "api_keys[0]" && f != "tenants.newco.api_keys[0]") || !strings.Contains(m["detail"].(string), "same key as") {
					t.Errorf("problem %s, want the clashing key named", a.body)
				}
			}},
		{"put bad id", "PUT", "/admin/v1/tenants/a%7Bb%7D", aliceToken, `{}`, 422, problemField("id", "tenant id must be 1 to 64 characters")},
		{"put not json", "PUT", "/admin/v1/tenants/newco", aliceToken, `{"outflow":`, 400, nil},
		{"put too large", "PUT", "/admin/v1/tenants/newco", aliceToken, `{"api_keys":["` + strings.Repeat("x", 3000) + `"]}`, 413, nil},
		{"patch changes one field", "PATCH", "/admin/v1/tenants/acme", aliceToken, `{"outflow":{"rate":20}}`, 200,
			func(t *testing.T, a answer) {
				ta := decodeTenant(t, a)
				// acme's capacity and min_rate were rate 5's defaults: they
				// follow the new rate (tenants.ApplyPatch).
				if ta.Source != "runtime" || ta.Version != 1 || specNumber(ta.Spec, "outflow.rate") != 20.0 ||
					specNumber(ta.Spec, "outflow.capacity") != 20.0 || specNumber(ta.Spec, "outflow.min_rate") != 2.0 ||
					specNumber(ta.Spec, "admission.limit") != 10.0 || specNumber(ta.Spec, "admission.burst") != 5.0 {
					t.Errorf("patched = %s, want rate 20, its default capacity and min_rate, and the rest as before", a.body)
				}
			}},
		{"patch null restores a default", "PATCH", "/admin/v1/tenants/acme", aliceToken, `{"outflow":{"capacity":null,"min_rate":null}}`, 200,
			func(t *testing.T, a answer) {
				ta := decodeTenant(t, a)
				if specNumber(ta.Spec, "outflow.capacity") != 20.0 || specNumber(ta.Spec, "outflow.min_rate") != 2.0 {
					t.Errorf("patched = %s, want capacity max(1, rate) = 20 and min_rate rate/10 = 2", a.body)
				}
			}},
		{"patch invalid", "PATCH", "/admin/v1/tenants/acme", aliceToken, `{"admission":{"limit":0}}`, 422,
			problemField("admission.limit", "must be >= 1 (got 0)")},
		{"patch unknown tenant", "PATCH", "/admin/v1/tenants/nope", aliceToken, `{}`, 404, nil},
		{"patch wrong content type", "PATCH", "/admin/v1/tenants/acme", aliceToken, "", 415, nil},
		{"post not allowed", "POST", "/admin/v1/tenants/acme", aliceToken, "", 405, func(t *testing.T, a answer) {
			if a.header.Get("Allow") != "GET, PUT, PATCH, DELETE" {
				t.Errorf("Allow = %q", a.header.Get("Allow"))
			}
		}},
		{"delete on the list not allowed", "DELETE", "/admin/v1/tenants", aliceToken, "", 405, nil},
		{"unknown sub-route", "GET", "/admin/v1/tenants/acme/nope", aliceToken, "", 404, nil},
		{"unknown admin route", "GET", "/admin/v1/other", aliceToken, "", 404, nil},
		{"delete runtime tenant", "DELETE", "/admin/v1/tenants/newco", bobToken, "", 204, nil},
		{"delete again", "DELETE", "/admin/v1/tenants/newco", bobToken, "", 404, nil},
		{"delete bad id", "DELETE", "/admin/v1/tenants/a%7Bb%7D", bobToken, "", 404, nil},
		{"patch bad id", "PATCH", "/admin/v1/tenants/a%7Bb%7D", bobToken, `{}`, 404, nil},
		{"get deleted", "GET", "/admin/v1/tenants/newco", aliceToken, "", 404, nil},
		{"audit", "GET", "/admin/v1/tenants/newco/audit", aliceToken, "", 200, func(t *testing.T, a answer) {
			var got struct {
				Entries []struct {
					At, Who, Action string
					Version         int64
					Changes         []struct {
						Path     string
						Old, New *string
					}
				}
				NextCursor *string `json:"next_cursor"`
			}
			if err := json.Unmarshal(a.body, &got); err != nil {
				t.Fatal(err)
			}
			side := func(v *string) string {
				if v == nil {
					return "-"
				}
				return *v
			}
			var summary []string
			for _, e := range got.Entries {
				s := e.Who + " " + e.Action + " v" + strconv.FormatInt(e.Version, 10)
				for _, c := range e.Changes {
					if c.Path == "outflow.rate" {
						s += " rate " + side(c.Old) + " → " + side(c.New)
					}
				}
				if e.At == "" {
					t.Errorf("entry without at: %s", a.body)
				}
				summary = append(summary, s)
			}
			want := []string{"bob delete v3 rate 4 → -", "bob update v2 rate 2 → 4", "alice create v1 rate - → 2"}
			if diff := cmp.Diff(want, summary); diff != "" {
				t.Errorf("audit, newest first (-want +got):\n%s", diff)
			}
			if got.NextCursor != nil || !strings.Contains(string(a.body), `"next_cursor":null`) {
				t.Errorf("next_cursor of the only page: %s, want null", a.body)
			}
		}},
		{"audit limit", "GET", "/admin/v1/tenants/newco/audit?limit=1", aliceToken, "", 200, func(t *testing.T, a answer) {
			if n := strings.Count(string(a.body), `"who"`); n != 1 {
				t.Errorf("limit=1 gave %d entries: %s", n, a.body)
			}
		}},
		{"audit limit, cursor", "GET", "/admin/v1/tenants/newco/audit?limit=1&cursor=3", aliceToken, "", 200, func(t *testing.T, a answer) {
			if !strings.Contains(string(a.body), `"version":2`) || !strings.Contains(string(a.body), `"next_cursor":"2"`) {
				t.Errorf("limit=1&cursor=3: %s, want version 2 and next_cursor 2", a.body)
			}
		}},
		{"audit bad limit", "GET", "/admin/v1/tenants/newco/audit?limit=0", aliceToken, "", 400, problemField("limit", "limit must be")},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			a := h.admin(t, st.method, st.path, st.token, st.body)
			if st.name == "patch wrong content type" {
				a = h.request(t, st.method, st.path, st.token, "text/plain", `{}`)
			}
			if a.status != st.status {
				t.Fatalf("%s %s: status %d, want %d: %s", st.method, st.path, a.status, st.status, a.body)
			}
			if st.status >= 400 && a.header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("error answer Content-Type %q, want application/problem+json", a.header.Get("Content-Type"))
			}
			if st.check != nil {
				st.check(t, a)
			}
		})
	}
	for _, m := range []struct {
		action, code string
		want         float64
	}{{"put", "201", 1}, {"put", "422", 5}, {"patch", "200", 2}, {"delete", "204", 1}, {"none", "405", 2}} {
		got := testenv.MetricValue(t, h.harness.reg, "sluice_admin_requests_total", map[string]string{"action": m.action, "code": m.code})
		if got != m.want {
			t.Errorf("sluice_admin_requests_total{action=%s,code=%s} = %v, want %v", m.action, m.code, got, m.want)
		}
	}
}

// TestAdminTombstonesFileTenant deletes a tenant of the file: its key stops
// working at once, a file reload does not bring it back, and a PUT does.
func TestAdminTombstonesFileTenant(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	cfg := adminConfig(t, tenantYAML("acme", "    outflow: {rate: 5}\n"))
	h := startAdminIngest(t, rdb, cfg, nil)
	if a := h.post(t, "acme", "/v1/jobs", `{"type":"email"}`); a.status != http.StatusAccepted {
		t.Fatalf("before delete: %d %s", a.status, a.body)
	}
	if a := h.admin(t, http.MethodDelete, "/admin/v1/tenants/acme", aliceToken, ""); a.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	if a := h.post(t, "acme", "/v1/jobs", `{"type":"email"}`); a.status != http.StatusUnauthorized {
		t.Errorf("after delete: %d, want 401: %s", a.status, a.body)
	}
	h.reg.SetBase(adminConfig(t, tenantYAML("acme", "    outflow: {rate: 6}\n")))
	if a := h.post(t, "acme", "/v1/jobs", `{"type":"email"}`); a.status != http.StatusUnauthorized {
		t.Errorf("after a file reload: %d, want 401 (the tombstone holds): %s", a.status, a.body)
	}
	if a := h.admin(t, http.MethodGet, "/admin/v1/tenants", aliceToken, ""); strings.Contains(string(a.body), `"acme"`) {
		t.Errorf("list shows the deleted tenant: %s", a.body)
	}
	body := `{"api_keys":["` + config.HashKey(apiKey("acme")) + `"]}`
	if a := h.admin(t, http.MethodPut, "/admin/v1/tenants/acme", aliceToken, body); a.status != http.StatusCreated {
		t.Fatalf("put after delete: %d, want 201: %s", a.status, a.body)
	}
	if a := h.post(t, "acme", "/v1/jobs", `{"type":"email"}`); a.status != http.StatusAccepted {
		t.Errorf("after put: %d, want 202: %s", a.status, a.body)
	}
}
