package ingest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestAdminRouting pins how the admin API routes what is not an operation:
// authentication comes before routing, a path's other methods (HEAD too,
// which a GET route does not take) are a 405 naming the allowed ones, and
// any other path, an escaped "/" in an id included, is a 404 naming the
// route. Every such answer is counted under action "none".
func TestAdminRouting(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML("acme", "")), nil)
	for _, tc := range []struct {
		method, path, token string
		status              int
		allow, detail       string
	}{
		{"HEAD", "/admin/v1/tenants", aliceToken, 405, "GET", ""},
		{"HEAD", "/admin/v1/tenants/acme", aliceToken, 405, "GET, PUT, PATCH, DELETE", ""},
		{"HEAD", "/admin/v1/tenants/acme/audit", aliceToken, 405, "GET", ""},
		{"POST", "/admin/v1/tenants", aliceToken, 405, "GET", "POST is not allowed here; use GET"},
		{"PUT", "/admin/v1/tenants/acme/audit", aliceToken, 405, "GET", "PUT is not allowed here; use GET"},
		{"POST", "/admin/v1/tenants/acme", "", 401, "", "missing, repeated or unknown admin token"},
		{"GET", "/admin/v1/nothing", "nope", 401, "", "missing, repeated or unknown admin token"},
		{"GET", "/admin/v1/tenants/", aliceToken, 404, "", "no route GET /admin/v1/tenants/"},
		{"GET", "/admin/v1/tenantsx", aliceToken, 404, "", "no route GET /admin/v1/tenantsx"},
		{"GET", "/admin/v1/tenants/a%2Fb", aliceToken, 404, "", "no route GET /admin/v1/tenants/a/b"},
		{"PUT", "/admin/v1/tenants/a%2Fb", aliceToken, 404, "", "no route PUT /admin/v1/tenants/a/b"},
		{"POST", "/admin/v1/tenants/a%2Fb", aliceToken, 404, "", "no route POST /admin/v1/tenants/a/b"},
		{"GET", "/admin/v1/tenants/a%2Fb/audit", aliceToken, 404, "", "no route GET /admin/v1/tenants/a/b/audit"},
		{"GET", "/admin/v1/tenants/acme/audit/x", aliceToken, 404, "", "no route GET /admin/v1/tenants/acme/audit/x"},
	} {
		a := h.request(t, tc.method, tc.path, tc.token, "", "")
		if a.status != tc.status || a.header.Get("Allow") != tc.allow || !strings.Contains(string(a.body), tc.detail) {
			t.Errorf("%s %s: %d, Allow %q, body %s; want %d, Allow %q, a body containing %q",
				tc.method, tc.path, a.status, a.header.Get("Allow"), a.body, tc.status, tc.allow, tc.detail)
		}
		if cc := a.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("%s %s: Cache-Control %q, want no-store", tc.method, tc.path, cc)
		}
	}
	for code, want := range map[string]float64{"405": 5, "401": 2, "404": 7} {
		if got := testenv.MetricValue(t, h.harness.reg, "sluice_admin_requests_total", map[string]string{"action": "none", "code": code}); got != want {
			t.Errorf("sluice_admin_requests_total{action=none,code=%s} = %v, want %v", code, got, want)
		}
	}
	if a := h.request(t, http.MethodGet, "/admin/v1/tenants/acme", aliceToken, "", ""); a.status != 200 {
		t.Errorf("GET acme: %d %s", a.status, a.body)
	}
}
