package api

import "testing"

// checkConsole exercises the web console's operations (ingest/ui.go): the
// page and its files, the overview and a tenant's history.
func (s *server) checkConsole(t *testing.T) {
	s.expect(t, "console page", 200, req{method: "GET", path: "/ui/"})
	for _, f := range []string{"app.js", "tenant.js", "chart.js", "app.css", "favicon.svg", "index.html"} {
		s.expect(t, "console file "+f, 200, req{method: "GET", path: "/ui/" + f})
	}
	s.expect(t, "console, unknown file", 404, req{method: "GET", path: "/ui/nope.js"})
	s.expect(t, "overview", 200, req{method: "GET", path: "/admin/v1/overview", auth: adminToken})
	s.expect(t, "overview, tenant key", 401, req{method: "GET", path: "/admin/v1/overview", auth: keyA})
	h := "/admin/v1/tenants/" + s.tenantA + "/history"
	s.expect(t, "history", 200, req{method: "GET", path: h, auth: adminToken})
	s.expect(t, "history, no token", 401, req{method: "GET", path: h})
	s.expect(t, "history, unknown tenant", 404, req{method: "GET", path: "/admin/v1/tenants/nosuch-" + s.tenantA + "/history", auth: adminToken})
}

// checkConsoleDown: with Redis down, the console's admin reads are 503s.
func (s *server) checkConsoleDown(t *testing.T) {
	s.expect(t, "overview", 503, req{method: "GET", path: "/admin/v1/overview", auth: adminToken})
	s.expect(t, "history", 503, req{method: "GET", path: "/admin/v1/tenants/" + s.tenantA + "/history", auth: adminToken})
}

// The console's checks, a conformanceGroup of TestHandlersMatchSpec.
func init() {
	addConformanceGroup(conformanceGroup{
		name:      "web console",
		run:       func(t *testing.T, s *server) { s.checkConsole(t) },
		redisDown: func(t *testing.T, s *server) { s.checkConsoleDown(t) },
	})
}
