package drainer

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// heldSet is the jobs this drainer holds (claimed, not yet settled), per
// tenant, so the lease keeper can extend their leases.
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
// a low outflow rate is not reaped while its drainer is alive.
func (d *Drainer) keepLeases(ctx context.Context) {
	tick := time.NewTicker(d.cfg.Settings.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for tenant, jobs := range d.held.snapshot() {
			if len(jobs) == 0 {
				continue
			}
			lost, err := d.cfg.Consumer.Extend(ctx, tenant, jobs)
			if err != nil {
				d.m.errors.WithLabelValues("extend").Inc()
				d.log.Warn("drainer: extend leases", "tenant", tenant, "jobs", len(jobs), "err", err)
				continue
			}
			if len(lost) > 0 {
				d.log.Info("drainer: leases lost; those jobs will be delivered again", "tenant", tenant, "jobs", len(lost))
			}
			d.extendDeliveries(ctx, tenant, jobs)
			d.extendSlots(ctx, tenant, jobs)
		}
	}
}

// extendSlots pushes the deadlines of the concurrency slots jobs hold to
// now + Lease (outflow.Semaphore.Extend), when the tenant has a cap; a job
// that holds none is left out by the script.
func (d *Drainer) extendSlots(ctx context.Context, tenant string, jobs []*queue.Claimed) {
	tn, _ := d.tenant(tenant)
	if tn.Outflow.Concurrency <= 0 {
		return
	}
	if err := d.slots.Extend(ctx, tenant, d.cfg.Settings.Lease, members(jobs)); err != nil {
		d.m.errors.WithLabelValues("extend").Inc()
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
// Lease/4 (at least every second) until ctx is done. Every drainer reaps;
// the script is atomic, so concurrent reapers never return a job twice.
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
			n, err := r.Reap(ctx, t)
			if err != nil {
				if ctx.Err() == nil {
					d.m.errors.WithLabelValues("reap").Inc()
					d.log.Warn("drainer: reap", "tenant", t, "err", err)
				}
				break
			}
			if n > 0 {
				d.m.reaped.Add(float64(n))
				d.log.Info("drainer: returned expired leases", "tenant", t, "jobs", n)
			}
		}
	}
}
