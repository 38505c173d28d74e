package tenants

import (
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
	rec, err := r.store.Get(ctx, id)
	if err != nil {
		return err
	}
	if _, ok := view(r.Base(), rec); !ok && rec.Version == 0 {
		return ErrNotFound
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
	if !keys.ValidTenant(id) {
		return false, nil
	}
	rec, err := r.store.Get(ctx, id)
	if err != nil {
		return false, err
	}
	_, ok := view(r.Base(), rec)
	return !ok && rec.Version > 0, nil
}
