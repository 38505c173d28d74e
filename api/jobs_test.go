package api

import (
	"encoding/json"
	"testing"
)

// checkJobLists exercises GET /v1/jobs (pages, a cursor, bad parameters,
// an admin naming the tenant) and POST …/queue:purge on tenant a.
func (s *server) checkJobLists(t *testing.T, a string) {
	list := func(auth, query string) req { return req{method: "GET", path: "/v1/jobs?" + query, auth: auth} }
	s.expect(t, "list queued", 200, list(keyA, "state=queued"))
	first := s.expect(t, "list queued, limit 1", 200, list(keyA, "state=queued&limit=1"))
	var page struct {
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal(first.body, &page); err != nil {
		t.Fatal(err)
	}
	if page.NextCursor != nil {
		s.expect(t, "list queued, next page", 200, list(keyA, "state=queued&limit=1&cursor="+*page.NextCursor))
	}
	s.expect(t, "list done, admin token", 200, list(adminToken, "state=done&tenant="+a))
	s.expect(t, "list, bad state", 400, list(keyA, "state=nosuch"))
	s.expect(t, "list, bad limit", 400, list(keyA, "state=queued&limit=501"))
	s.expect(t, "list, bad cursor", 400, list(keyA, "state=queued&cursor=x"))
	s.expect(t, "list, admin without tenant", 400, list(adminToken, "state=queued"))
	s.expect(t, "list, no key", 401, list("", "state=queued"))
	s.expect(t, "list, unknown tenant", 404, list(adminToken, "state=queued&tenant=nosuch-"+a))

	purge := "/admin/v1/tenants/" + a + "/queue:purge"
	s.expect(t, "purge", 200, req{method: "POST", path: purge, auth: adminToken})
	s.expect(t, "purge, tenant key", 401, req{method: "POST", path: purge, auth: keyA})
	s.expect(t, "purge, unknown tenant", 404, req{method: "POST", path: "/admin/v1/tenants/nosuch-" + a + "/queue:purge", auth: adminToken})
	s.expect(t, "list queued after the purge", 200, list(keyA, "state=queued"))
}
