package api

import "testing"

// The checks of the ops routes (no authentication), registered as a
// conformanceGroup of TestHandlersMatchSpec.
func init() {
	addConformanceGroup(conformanceGroup{
		name: "ops",
		run: func(t *testing.T, s *server) {
			s.expect(t, "healthz", 200, req{method: "GET", path: "/healthz"})
			s.expect(t, "readyz", 200, req{method: "GET", path: "/readyz"})
			s.expect(t, "metrics", 200, req{method: "GET", path: "/metrics"})
		},
		redisDown: func(t *testing.T, s *server) {
			s.expect(t, "readyz", 503, req{method: "GET", path: "/readyz"})
		},
	})
}
