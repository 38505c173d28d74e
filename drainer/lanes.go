package drainer

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// This file holds which tenants have a lane: under a queue.Prober consumer
// only those with work (a lane ends after laneIdleExit of empty claims and
// the probe starts it again when jobs come); otherwise every configured
// tenant.

// laneIdleExit is how long a lane's first pull loop finds its queue empty,
// in a row, before the lane ends, when the consumer is a queue.Prober. A
// job pushed after that waits for the next probe (at most probeEvery) plus
// one claim, as an idle lane's poll did (idlePollMax).
const laneIdleExit = 3 * time.Second

// probeEvery is the longest pause between two probes of a queue.Prober
// consumer; a shorter lease shortens it to Lease/4, as the reaper's tick, so
// the probe's reaping is not later than the reaper's.
const probeEvery = time.Second

// laneSet is Run's lanes: the tenants with a lane, and the wait groups of
// the lanes and of their dispatches.
type laneSet struct {
	d            *Drainer
	ctx, workCtx context.Context // Run's: lanes end with ctx, dispatches with workCtx
	prober       queue.Prober    // nil: every configured tenant keeps a lane
	lanes        sync.WaitGroup
	dispatches   sync.WaitGroup
	// mu guards started. A lane retires itself under mu when its tenant is
	// no longer configured, or ends idle, so discovery sees either the lane
	// or its absence, never a lane about to stop.
	mu      sync.Mutex
	started map[string]bool
}

func newLaneSet(ctx, workCtx context.Context, d *Drainer) *laneSet {
	ls := &laneSet{d: d, ctx: ctx, workCtx: workCtx, started: map[string]bool{}}
	ls.prober, _ = d.cfg.Consumer.(queue.Prober)
	return ls
}

// every is how often Run calls discover.
func (ls *laneSet) every() time.Duration {
	if ls.prober == nil {
		return discoverEvery
	}
	return min(probeEvery, max(ls.d.cfg.Settings.Lease/4, 10*time.Millisecond))
}

// discover starts a lane for every tenant that has none (laneTenants): under
// a queue.Prober only for those it reports ready, after returning the
// expired leases it found (Reap).
func (ls *laneSet) discover() {
	tenants := ls.d.laneTenants(ls.ctx)
	if ls.prober != nil {
		tenants = ls.probe(tenants)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, t := range tenants {
		if ls.started[t] {
			continue
		}
		ls.started[t] = true
		ls.lanes.Add(1)
		ls.d.m.lanes.Inc()
		go func() {
			defer ls.lanes.Done()
			defer ls.d.m.lanes.Dec()
			ls.d.lane(ls.ctx, ls.workCtx, t, &ls.dispatches, ls.retire, ls.idle)
		}()
	}
}

// probe asks the prober which tenants have work and reaps those with an
// expired lease (when the consumer reaps); on failure it starts none.
func (ls *laneSet) probe(tenants []string) []string {
	d := ls.d
	ready, expired, err := ls.prober.Probe(ls.ctx, tenants, ls.every())
	if err != nil && ls.ctx.Err() == nil {
		d.m.errors.WithLabelValues("probe").Inc()
		d.log.Warn("drainer: probe tenants", "tenants", len(tenants), "err", err)
	}
	if r, ok := d.cfg.Consumer.(reaper); ok {
		for _, t := range expired {
			d.reapOne(ls.ctx, r, t)
		}
	}
	return ready
}

// retire reports whether tenant's lane must stop (the tenant is no longer
// configured and DiscoverUnconfigured is off), forgetting the lane when so.
func (ls *laneSet) retire(tenant string) bool {
	if ls.d.cfg.DiscoverUnconfigured {
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if _, ok := ls.d.tenant(tenant); ok {
		return false
	}
	delete(ls.started, tenant)
	return true
}

// idle reports whether tenant's lane, whose queue stayed empty for
// laneIdleExit, ends now (only under a prober), forgetting it when so.
func (ls *laneSet) idle(tenant string) bool {
	if ls.prober == nil {
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.started, tenant)
	return true
}

// laneTenants returns the configured tenants, in no order, plus those the
// backend knows when DiscoverUnconfigured is set (then sorted, each once).
// Called every probe: at 10,000 tenants a sort each second was a tenth of
// an idle drainer's CPU.
func (d *Drainer) laneTenants(ctx context.Context) []string {
	out := d.tenantIDs()
	if d.cfg.DiscoverUnconfigured {
		more, err := d.cfg.Consumer.Tenants(ctx)
		if err != nil {
			d.m.errors.WithLabelValues("tenants").Inc()
			d.log.Warn("drainer: list tenants", "err", err)
		}
		out = append(slices.Clone(out), more...) // out is shared: tenantIDs
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out
}

// lane runs tenant's pull loops until ctx is done; its waits delay no
// other tenant. The first loop runs throughout; the laneClaimers − 1 extra
// ones only while the tenant has no outflow rate and no concurrency cap (the
// first starts them, they end when the tenant gets a gate), so a shaped
// tenant's lane is one goroutine. Before each claim a loop asks retire whether the
// tenant was removed; once one is told so, all of them end. When the first
// loop's claims find the queue empty for laneIdleExit, it asks idle whether
// the lane may end (a queue.Prober starts it again) and, told so, all end.
func (d *Drainer) lane(ctx, workCtx context.Context, tenant string, dispatches *sync.WaitGroup, retire, idle func(string) bool) {
	c := &laneCtl{tenant: tenant, dispatches: dispatches, arrived: &laneWake{}}
	c.stop = func() bool {
		if c.ended.Load() {
			return true
		}
		if !retire(tenant) {
			return false
		}
		d.log.Info("drainer: tenant removed; its lane stops and its queued jobs wait", "tenant", tenant)
		c.end()
		return true
	}
	c.idle = func() bool {
		if !idle(tenant) {
			return false
		}
		c.end()
		return true
	}
	var wg sync.WaitGroup
	d.arrivals.Store(tenant, c.arrived)
	defer d.arrivals.CompareAndDelete(tenant, c.arrived)
	c.spawn = func() {
		// Called by the first loop, so wg is above zero while it adds.
		if !c.extras.CompareAndSwap(0, laneClaimers-1) {
			return
		}
		for range laneClaimers - 1 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.extras.Add(-1)
				d.pull(ctx, workCtx, c, true)
			}()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.pull(ctx, workCtx, c, false)
	}()
	wg.Wait()
}

// laneCtl is what a lane's pull loops share.
type laneCtl struct {
	tenant     string
	dispatches *sync.WaitGroup
	stop       func() bool  // the tenant was removed: end (checked before each claim)
	idle       func() bool  // the queue stayed empty: may the lane end?
	spawn      func()       // starts the extra loops when none runs (the first loop calls it)
	extras     atomic.Int32 // extra loops running
	ended      atomic.Bool
	endOnce    sync.Once
	w          laneWake  // parked extra loops wait for a claimed job
	batch      takeBatch // the size of the lane's next take
	arrived    *laneWake // the first loop's idle poll ends early (jobsArrived)
}

// end makes every pull loop of the lane return: c.stop reports true from
// now, and the loops parked or idling wake.
func (c *laneCtl) end() {
	c.endOnce.Do(func() {
		c.ended.Store(true)
		c.w.wake()
	})
}

// jobsArrived wakes tenant's lane from its idle poll: jobs were put on its
// queue (the scheduler moved due scheduled jobs), so a lane that saw it
// empty claims at once instead of after up to idlePollMax. A tenant without
// a lane (ended idle) gets one at once: Run probes again.
func (d *Drainer) jobsArrived(tenant string) {
	if w, ok := d.arrivals.Load(tenant); ok {
		w.(*laneWake).wake()
		return
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}
