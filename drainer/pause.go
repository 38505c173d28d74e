package drainer

import (
	"context"

	"github.com/sluicehq/sluice/config"
)

// This file holds the pause gate (config.Outflow.Paused): a paused tenant's
// lane claims nothing and starts no delivery; its deliveries in flight
// finish. The gate reads the drainer's tenants (SetTenants), so a pause or
// a resume reaches every drainer as fast as the registry hands it over
// (under a second), and SetTenants wakes the parked lane at once.
//
// Where a job is when its tenant is paused:
//
//   - not claimed: it stays in the backend (Redis list, or the Kafka
//     consumer's FIFO and the log behind it) — no claim, no lease;
//   - claimed and waiting for its concurrency slot or outflow turn: it goes
//     back to the head of its queue (Consumer.Release) and its slot is
//     given back, so it is the first delivered on resume;
//   - holding its turn, waiting for room among MaxInFlight: released the
//     same way (its turn is spent: on resume the tenant gets at most its
//     bucket's capacity at once, never more);
//   - dispatched: the delivery finishes and is settled as usual.
//
// On resume the lane claims again; the shared bucket, which leaked while
// nothing was taken, lets at most its capacity go at once, then the rate.
//
// On Kafka a paused tenant is a tenant whose lane claims nothing, the
// extreme of a backlogged one (docs/adr/0005-kafka-lanes.md): its FIFO in
// each partition fills to MaxTenantJobs, then its later jobs stay in Kafka
// while the partition goes on for every other tenant; its first unfinished
// offset holds the partition's commit watermark, so the partition stops
// fetching for all only when MaxWindow offsets (2^24 by default) have
// passed behind it. A restart or rebalance during the pause reads the
// paused tenant's jobs again and delivers again the other tenants' jobs
// finished above the watermark that the commit metadata cannot list (at
// least once). A tenant paused for long on a busy partition belongs on a
// topic of its own.

// paused reports whether tenant is configured and paused now, or held
// because it has nowhere to deliver (noTarget).
func (d *Drainer) paused(tenant string) bool {
	t, ok := d.tenant(tenant)
	return ok && (t.Outflow.Paused || d.noTarget(t))
}

// noTarget reports whether a drainer that delivers over HTTP has no target
// URL for any of t's jobs: neither the tenant nor any job type has one
// (PATCH {"target":null}, a PUT without a target). Such a tenant is held
// as a paused one: its jobs wait, unclaimed, until a target is set. Before,
// every job was claimed and dead-lettered at once ("no target url"). A job
// of a type without a URL of a tenant that has some (a type's own) still
// fails as before.
func (d *Drainer) noTarget(t config.Tenant) bool {
	if !d.needsTarget || t.Target.URL != "" {
		return false
	}
	for _, jt := range t.JobTypes {
		if jt.Target.URL != "" {
			return false
		}
	}
	return true
}

// warnNoTarget logs each tenant of next held for want of a target that
// was not held in prev (nil: none).
func (d *Drainer) warnNoTarget(prev *map[string]config.Tenant, next map[string]config.Tenant) {
	for id, t := range next {
		if !d.noTarget(t) {
			continue
		}
		if prev != nil {
			if p, ok := (*prev)[id]; ok && d.noTarget(p) {
				continue
			}
		}
		d.log.Warn("drainer: tenant has no target url; its jobs wait, undelivered, until one is set", "tenant", id)
	}
}

// waitResumed holds a pull loop while its tenant is paused: it returns when
// a SetTenants shows the tenant resumed (or removed: the loop then retires)
// or when ctx is done. It claims nothing and polls nothing meanwhile.
func (d *Drainer) waitResumed(ctx context.Context, tenant string) {
	for {
		changed := d.tenantsChanged()
		if !d.paused(tenant) || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
