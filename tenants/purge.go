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
// that changes nothing. A tenant that does not exist is ErrNotFound.
func (r *Registry) RecordPurge(ctx context.Context, id string, n int64, who string, at time.Time) error {
	if !keys.ValidTenant(id) {
		return ErrNotFound
	}
	rec, err := r.store.Get(ctx, id)
	if err != nil {
		return err
	}
	if _, ok := view(r.Base(), rec); !ok {
		return ErrNotFound
	}
	if err := r.Note(ctx, id, who, at, ActionPurge, n); err != nil {
		return fmt.Errorf("tenants: record purge of %s: %w", id, err)
	}
	return nil
}
