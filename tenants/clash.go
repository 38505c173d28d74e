package tenants

import (
	"context"
	"errors"
)

// undoClash checks a put of tenant c.Tenant, stored as version ver, against
// every record as it is now. plan validated the put against the records it
// read, so a problem naming the tenant now came from a write that landed
// meanwhile: two admins giving one API key to two tenants at once, each
// write validated before the other's landed (a hostile probe stored 16 of
// 30 such pairs, and the clash then froze every registry). The put is
// undone (prior, the record before it, written back with compare-and-set
// on ver, audited) and the problems returned as a *SpecError (422, naming
// the field and the other tenant), so at most one of two racing writes
// stands; both may be refused, and the client sends again. A record the
// check cannot read, or an undo that loses its own race, is left to the
// registries, which set a clashing tenant aside (quarantine).
func (r *Registry) undoClash(ctx context.Context, c Change, prior Record, ver int64) error {
	recs, err := r.store.List(ctx)
	if err != nil {
		return nil
	}
	base := r.Base()
	clash := Validate(Merge(base, recs), c.Tenant)
	if clash == nil {
		return nil
	}
	undo := Change{Tenant: c.Tenant, Expect: ver, Who: c.Who + " (undone: clashed with a concurrent write)",
		At: c.At, Old: &c.Spec, Action: ActionDelete}
	_, inFile := base.Tenants[c.Tenant]
	switch {
	case prior.Spec != nil:
		undo.Op, undo.Spec, undo.Action = OpPut, *prior.Spec, ActionUpdate
	case prior.Deleted:
		undo.Op = OpTombstone
	default:
		undo.Op = OpClear
		if inFile {
			undo.Action = ActionUpdate
		}
	}
	if _, err := r.store.Write(ctx, undo); err != nil && !errors.Is(err, ErrNotAnnounced) {
		r.log.Warn("tenants: a put that clashed with a concurrent write could not be undone; the registries set the tenant aside",
			"tenant", c.Tenant, "err", err)
	}
	if err := r.Refresh(ctx); err != nil {
		r.log.Warn("tenants: refresh after undoing a write", "tenant", c.Tenant, "err", err)
	}
	return clash
}
