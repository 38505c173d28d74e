package ingest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestJobListQueries: GET /v1/jobs answers a 400 problem naming a bad
// state, limit or cursor; an admin names the tenant (400 without, 404 for
// an unknown one); a tenant key sees only its own; other methods than GET
// and POST are a 405 with Allow: GET, POST.
func TestJobListQueries(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant, other := testenv.Name(t, "jl"), testenv.Name(t, "jl")
	h := startIngest(t, visConfig(t, "    outflow: {rate: 5}\n    target: {url: \"http://127.0.0.1:9/hook\"}\n", tenant, other), deps{rdb: rdb})
	key := apiKey(tenant)
	for _, tc := range []struct {
		name, key, query string
		status           int
		field, detail    string
	}{
		{"no state", key, "", 400, "state", "one of queued, scheduled"},
		{"unknown state", key, "state=cancelled", 400, "state", `got "cancelled"`},
		{"limit 0", key, "state=queued&limit=0", 400, "limit", "1 to 500"},
		{"limit above 500", key, "state=queued&limit=501", 400, "limit", "1 to 500"},
		{"limit not a number", key, "state=queued&limit=x", 400, "limit", "1 to 500"},
		{"bad cursor", key, "state=queued&cursor=!!", 400, "cursor", "next_cursor"},
		{"limit repeated", key, "state=queued&limit=1&limit=2", 400, "limit", "limit is given 2 times"},
		{"state repeated", key, "state=queued&state=done", 400, "state", "state is given 2 times"},
		{"cursor repeated", key, "state=queued&cursor=a&cursor=b", 400, "cursor", "cursor is given 2 times"},
		{"tenant repeated", adminToken, "state=queued&tenant=" + tenant + "&tenant=" + other, 400, "tenant", "tenant is given 2 times"},
		{"another tenant", key, "state=queued&tenant=" + other, 404, "", "no tenant"},
		{"admin without tenant", adminToken, "state=queued", 400, "tenant", "?tenant="},
		{"admin, unknown tenant", adminToken, "state=queued&tenant=nosuch", 404, "", "no tenant"},
		{"no key", "", "state=queued", 401, "Authorization", "Bearer"},
	} {
		a := h.request(t, http.MethodGet, "/v1/jobs?"+tc.query, tc.key, "", "")
		p := a.json(t)
		if a.status != tc.status || p["field"] != nilIfEmpty(tc.field) || !strings.Contains(p["detail"].(string), tc.detail) {
			t.Errorf("%s: %d %s, want %d naming %q with %q", tc.name, a.status, a.body, tc.status, tc.field, tc.detail)
		}
	}
	if p := h.list(t, adminToken, "state=done&tenant="+tenant); p.Tenant != tenant || len(p.Jobs) != 0 || p.NextCursor != nil {
		t.Errorf("admin list of an empty tenant: %+v", p)
	}
	a := h.request(t, http.MethodDelete, "/v1/jobs", key, "", "")
	if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "GET, POST" {
		t.Errorf("DELETE /v1/jobs = %d, Allow %q; want 405, GET, POST", a.status, a.header.Get("Allow"))
	}
}
