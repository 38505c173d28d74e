package api

import (
	"sort"
	"sync"
	"testing"
)

// A conformanceGroup is one group of TestHandlersMatchSpec's checks kept in
// a file of its own, so that the checks of a route live next to each other
// rather than in openapi_test.go (a dlq_conformance_test.go, say, with
//
//	func init() { addConformanceGroup(conformanceGroup{name: "dlq", run: ..., redisDown: ...}) }
//
// ). run is called with the test server after the built-in groups (tenants
// s.tenantA and s.tenantB, credentials keyA, keyB and adminToken), before
// the check that every route is documented; redisDown, when set, after
// the server's Redis is stopped. Both send with s.expect, which checks each
// answer against the spec and records the operation as covered: every
// documented operation must be reached by some check (reportCoverage).
type conformanceGroup struct {
	name      string
	run       func(t *testing.T, s *server)
	redisDown func(t *testing.T, s *server)
}

var (
	groupsMu sync.Mutex
	groups   []conformanceGroup
)

// addConformanceGroup registers g; call it from an init func.
func addConformanceGroup(g conformanceGroup) {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	groups = append(groups, g)
}

// conformanceGroups returns the registered groups in name order.
func conformanceGroups() []conformanceGroup {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	out := append([]conformanceGroup(nil), groups...)
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}
