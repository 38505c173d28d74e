package tenants

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/keys"
)

// keepEvery is how often each registry refreshes the TTLs of the runtime
// tenants' keys (Store.Keep): daily, far inside keys.OverrideTTL.
const keepEvery = 24 * time.Hour

// Keep refreshes the TTL (keys.OverrideTTL) of every runtime tenant's keys:
// the tenant set, the global change counter, and each listed tenant's
// override hash (spec, tombstone, outflow fields) and audit list. A write
// refreshes its tenant's keys; without Keep, a runtime tenant left
// unchanged for keys.OverrideTTL (365 days) vanished (its API key refused,
// its queue stranded, a deleted file tenant back), and the whole set with
// it when no tenant was written for that long. Every registry runs it at
// its start and daily (Run), so the keys live as long as any ingest or
// drainer runs. One pipeline: two PEXPIREs per tenant.
func (s *Store) Keep(ctx context.Context) error {
	ids, err := s.rdb.SMembers(ctx, keys.Tenants()).Result()
	if err != nil {
		return fmt.Errorf("tenants: keep: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	pipe.PExpire(ctx, keys.Tenants(), keys.OverrideTTL)
	pipe.PExpire(ctx, keys.TenantsVersion(), keys.OverrideTTL)
	for _, id := range ids {
		if keys.ValidTenant(id) {
			pipe.PExpire(ctx, keys.Override(id), keys.OverrideTTL)
			pipe.PExpire(ctx, keys.Audit(id), keys.OverrideTTL)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("tenants: keep: %w", err)
	}
	return nil
}

// keep runs Store.Keep, logging a failure (the next day's run, or any
// write, refreshes them).
func (r *Registry) keep(ctx context.Context) {
	if err := r.store.Keep(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("tenants: refresh the runtime tenants' TTLs", "err", err)
	}
}
