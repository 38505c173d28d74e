package tenants

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/keys"
)

// RecordPurge records in tenant id's audit that who purged n of its queued
// jobs at at (POST /admin/v1/tenants/{id}/queue:purge): an entry with action
// ActionPurge and count n (Registry.Note). The tenant's spec is
// left as it is; its version rises by one (one entry per version, as
// tenant_write.lua keeps the audit), which other instances see as a change
// that changes nothing. A tenant that never existed is ErrNotFound; a
// deleted one (Deleted) is audited as any other.
func (r *Registry) RecordPurge(ctx context.Context, id string, n int64, who string, at time.Time) error {
	if !keys.ValidTenant(id) {
		return ErrNotFound
	}
	if ok, err := r.Reachable(ctx, id); err != nil || !ok {
		return cmp.Or(err, ErrNotFound)
	}
	if err := r.Note(ctx, id, who, at, ActionPurge, n); err != nil {
		return fmt.Errorf("tenants: record purge of %s: %w", id, err)
	}
	return nil
}

// Deleted reports whether tenant id was deleted through the admin API and
// is not configured again: its record has a version (a tombstone, or a
// cleared spec) and no view. DELETE removes a tenant's spec, not its jobs;
// purge and the dead-letter operations still reach a deleted tenant's
// queue and letters (before, they answered 404, and the jobs could only be
// dropped by creating the tenant again, which delivered them at once).
func (r *Registry) Deleted(ctx context.Context, id string) (bool, error) {
	exists, deleted, err := r.known(ctx, id)
	return !exists && deleted, err
}

// Reachable reports whether tenant id exists or was deleted (Deleted): its
// queue and dead letters are then an admin's to purge and list.
func (r *Registry) Reachable(ctx context.Context, id string) (bool, error) {
	exists, deleted, err := r.known(ctx, id)
	return exists || deleted, err
}

// known reads tenant id's record once: exists (it has a view), and deleted
// (no view, but a record with a version: a tombstone or a cleared spec).
func (r *Registry) known(ctx context.Context, id string) (exists, deleted bool, err error) {
	if !keys.ValidTenant(id) {
		return false, false, nil
	}
	rec, err := r.store.Get(ctx, id)
	if err != nil {
		return false, false, err
	}
	_, exists = view(r.Base(), rec)
	return exists, !exists && rec.Version > 0, nil
}
