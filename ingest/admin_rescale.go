package ingest

import (
	"context"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/tenants"
)

// rescaleGCRA carries the stored state of each gcra policy whose rate a
// write changed over to the new rate (limits.RescaleGCRA), so an upgraded
// tenant is not held back by a debt computed under the old plan. The write
// is already stored; a failure is logged and leaves the old debt, which
// drains at the new rate.
func (s *Server) rescaleGCRA(ctx context.Context, id string, res tenants.Result) {
	if res.Old == nil {
		return
	}
	now := s.scriptNow() // zero: Redis TIME, as the admission scripts use
	for name, pair := range gcraChanges(*res.Old, res.Spec) {
		if _, err := limits.RescaleGCRA(ctx, s.rdb, id, pair[0], pair[1], now); err != nil {
			s.log.Warn("ingest: rescale gcra state after a limit change", "tenant", id, "policy", name, "err", err)
		}
	}
}

// gcraChanges returns, by policy name, the old and new policy of every gcra
// policy of the tenant ("tenant", "type.<type>") that is gcra before and
// after and whose limit, period or burst changed (a lowered burst alone
// caps the debt at the new τ).
func gcraChanges(old, cur config.Tenant) map[string][2]limits.Policy {
	out := map[string][2]limits.Policy{}
	pair := func(name string, a, b config.Admission) {
		po, ok1 := a.Policy(name)
		pn, ok2 := b.Policy(name)
		if ok1 && ok2 && po.Algorithm == limits.AlgGCRA && pn.Algorithm == limits.AlgGCRA &&
			(po.Limit != pn.Limit || po.Period != pn.Period || po.Burst != pn.Burst) {
			out[name] = [2]limits.Policy{po, pn}
		}
	}
	pair("tenant", old.Admission, cur.Admission)
	for typ, jt := range cur.JobTypes {
		if prev, ok := old.JobTypes[typ]; ok {
			pair("type."+typ, prev.Admission, jt.Admission)
		}
	}
	return out
}
