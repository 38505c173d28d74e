package tenants

import (
	"context"
	"errors"
	"fmt"
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
// check cannot read is left to the registries, which set the clash aside
// (quarantine); an undo that fails leaves the put standing and answers
// ErrConflict (409: read the tenant and send again), never a refusal.
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
	_, uerr := r.store.Write(ctx, undo)
	if err := r.Refresh(ctx); err != nil {
		r.log.Warn("tenants: refresh after undoing a write", "tenant", c.Tenant, "err", err)
	}
	if uerr != nil && !errors.Is(uerr, ErrNotAnnounced) {
		// The put stands: never answer it refused. A 409 asks the client to
		// read the tenant and send again; the registries set the clash aside.
		r.log.Warn("tenants: a put that clashed with a concurrent write could not be undone; it stands, and the registries set the clash aside",
			"tenant", c.Tenant, "clash", clash, "err", uerr)
		return fmt.Errorf("tenants: put %s clashed with a concurrent write (%v) and could not be undone: %w", c.Tenant, clash, ErrConflict)
	}
	return clash
}
