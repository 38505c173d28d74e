package drainer

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/outflow"
	"github.com/sluicehq/sluice/queue"
)

// heldSet is the jobs this drainer holds (claimed, not yet settled), per
// tenant, so the lease keeper can extend their leases. A job being settled
// (its finishing call on the wire) stays in the set, marked false: it is
// still extended (an extension never makes a lease anew, and a slow finish
// with a short lease must not lose it), but when its lease is gone by the
// extension it is not reported lost (the finish took it).
type heldSet struct {
	mu       sync.Mutex
	byTenant map[string]map[*queue.Claimed]bool
}

func (h *heldSet) add(tenant string, j *queue.Claimed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.byTenant[tenant]
	if !ok {
		m = map[*queue.Claimed]bool{}
		h.byTenant[tenant] = m
	}
	m[j] = true
}

// held reports which of jobs tenant still holds (not settled or being
// settled since).
func (h *heldSet) held(tenant string, jobs []*queue.Claimed) []*queue.Claimed {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*queue.Claimed
	for _, j := range jobs {
		if h.byTenant[tenant][j] {
			out = append(out, j)
		}
	}
	return out
}

// settling marks j as being settled: the keeper does not report it lost.
func (h *heldSet) settling(tenant string, j *queue.Claimed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.byTenant[tenant]; m[j] {
		m[j] = false
	}
}

func (h *heldSet) remove(tenant string, j *queue.Claimed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byTenant[tenant], j)
}

// snapshot returns the held jobs per tenant.
func (h *heldSet) snapshot() map[string][]*queue.Claimed {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]*queue.Claimed, len(h.byTenant))
	for t, m := range h.byTenant {
		for j := range m {
			out[t] = append(out[t], j)
		}
	}
	return out
}

// keepLeases extends the leases (and concurrency slots) of every held job
// every Lease/3 until ctx is done, so a job waiting for a slow downstream or
// a low outflow rate is not reaped while its drainer is alive. A consumer
// that extends all tenants at once (queue.BatchExtender: Redis) gets one
// call per tick, and the deliveries and slots of all tenants go in one
// pipeline after it (extendOthers): two round trips per tick for the whole
// drainer, not two or three per tenant.
func (d *Drainer) keepLeases(ctx context.Context) {
	tick := time.NewTicker(d.cfg.Settings.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		held := d.held.snapshot()
		lost, errs := d.extendLeases(ctx, held)
		for tenant, err := range errs {
			d.m.errors.WithLabelValues("extend").Inc()
			d.log.Warn("drainer: extend leases", "tenant", tenant, "jobs", len(held[tenant]), "err", err)
			delete(held, tenant)
		}
		for tenant, jobs := range lost {
			// A job finished between the snapshot and the extension has
			// no lease to extend, and is not lost.
			if jobs = d.held.held(tenant, jobs); len(jobs) > 0 {
				d.log.Info("drainer: leases lost; those jobs will be delivered again", "tenant", tenant, "jobs", len(jobs))
			}
		}
		d.extendOthers(ctx, held)
	}
}

// extendLeases extends every tenant's held leases: through
// queue.BatchExtender when the consumer is one, else one Extend per tenant.
func (d *Drainer) extendLeases(ctx context.Context, held map[string][]*queue.Claimed) (map[string][]*queue.Claimed, map[string]error) {
	if b, ok := d.cfg.Consumer.(queue.BatchExtender); ok {
		return b.ExtendAll(ctx, held)
	}
	lost, errs := map[string][]*queue.Claimed{}, map[string]error{}
	for tenant, jobs := range held {
		if len(jobs) == 0 {
			continue
		}
		l, err := d.cfg.Consumer.Extend(ctx, tenant, jobs)
		if err != nil {
			errs[tenant] = err
			continue
		}
		lost[tenant] = l
	}
	return lost, errs
}

// extendOthers pushes the deadlines of the held jobs' deliveries in progress
// (keys.Delivering: now + Lease, as their leases, so a delivery longer than
// a lease still counts as in flight; a job the backend counts by its lease,
// queue.Claimed.InLease, is not there) and, for a tenant with a concurrency
// cap, of the slots they hold (keys.Inflight), for every tenant in one
// pipeline. Members that are not there (a job waiting for its turn, or
// settled meanwhile) are left out by the script. Errors are counted.
func (d *Drainer) extendOthers(ctx context.Context, held map[string][]*queue.Claimed) {
	var calls []lua.Call
	for tenant, jobs := range held {
		var there []*queue.Claimed
		for _, j := range jobs {
			if !j.InLease {
				there = append(there, j)
			}
		}
		if len(there) > 0 {
			calls = append(calls, outflow.Extend{Key: keys.Delivering(tenant), Lease: d.cfg.Settings.Lease, Members: members(there)}.Call())
		}
		if tn, _ := d.tenant(tenant); tn.Outflow.Concurrency > 0 && len(jobs) > 0 {
			calls = append(calls, outflow.Extend{Key: keys.Inflight(tenant), Lease: d.cfg.Settings.Lease, Members: members(jobs)}.Call())
		}
	}
	if len(calls) == 0 {
		return
	}
	for _, cmd := range lua.Exec(ctx, d.cfg.Redis, calls, nil) {
		v, err := cmd.Result()
		if err == nil {
			_, err = outflow.ParseExtend(v)
		}
		if err != nil && ctx.Err() == nil {
			d.m.errors.WithLabelValues("extend").Inc()
		}
	}
}

// members returns the jobs' lease members (queue.Claimed.Token).
func members(jobs []*queue.Claimed) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Token()
	}
	return out
}

// reaper is the optional part of a Consumer that returns expired leases
// (the Redis backend; Kafka redelivers by offsets instead).
type reaper interface {
	Reap(ctx context.Context, tenant string) (int, error)
}

// reap returns the configured tenants' expired leases to their queues every
// Lease/4 (at least every second) until ctx is done, when the consumer is no
// queue.Prober (else discover reaps the tenants the probe finds with an
// expired lease). Every drainer reaps; the script is atomic, so concurrent
// reapers never return a job twice.
func (d *Drainer) reap(ctx context.Context) {
	r, ok := d.cfg.Consumer.(reaper)
	if !ok {
		return
	}
	tick := time.NewTicker(min(d.cfg.Settings.Lease/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, t := range d.laneTenants(ctx) {
			if !d.reapOne(ctx, r, t) {
				break
			}
		}
	}
}

// reapOne returns tenant's expired leases (counted and logged); it reports
// false when the backend failed.
func (d *Drainer) reapOne(ctx context.Context, r reaper, tenant string) bool {
	n, err := r.Reap(ctx, tenant)
	if err != nil {
		if ctx.Err() == nil {
			d.m.errors.WithLabelValues("reap").Inc()
			d.log.Warn("drainer: reap", "tenant", tenant, "err", err)
		}
		return false
	}
	if n > 0 {
		d.m.reaped.Add(float64(n))
		d.log.Info("drainer: returned expired leases", "tenant", tenant, "jobs", n)
	}
	return true
}
