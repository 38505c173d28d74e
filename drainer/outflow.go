package drainer

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/outflow"
	"github.com/sluicehq/sluice/queue"
)

// Bounds of a lane's sleep between two asks of the outflow bucket. A wait
// the script answers is clamped into them: below outflowWaitMin a lane
// would call the script as fast as Redis answers (no wait that short loses
// throughput: the water leaked meanwhile is spent at the next call), and
// past outflowWaitMax it asks again anyway, so an override raising the rate
// is seen within it.
const (
	outflowWaitMin = time.Millisecond
	outflowWaitMax = 10 * time.Second
)

// flow is waitTurn's and acquireSlot's answer.
type flow int

const (
	flowGo      flow = iota // the job may go now
	flowStop                // ctx is done
	flowNever               // the job's cost exceeds the bucket's capacity
	flowRemoved             // the tenant is no longer configured
	flowPaused              // the tenant is paused (config.Outflow.Paused)
)

// currentOutflow is the tenant's outflow limit as the drainer's
// configuration holds it now (SetTenants). ok is false when the tenant was
// removed (and unconfigured tenants are not drained); an unconfigured
// tenant drained by DiscoverUnconfigured has the zero outflow (unlimited).
func (d *Drainer) currentOutflow(tenant string) (o outflow.Limit, ok bool) {
	tn, ok := d.tenant(tenant)
	if !ok && !d.cfg.DiscoverUnconfigured {
		return outflow.Limit{}, false
	}
	return outflow.Of(tn.Outflow), true
}

// waitTurn waits until the tenant's shared bucket gives job its turn,
// asking again after each returned wait (another drainer may take its turn
// first). It asks turnLead before the turn falls due (turnSleep) and the
// bucket grants a turn due within turnAhead for a send at its time
// (outflow.Bucket.TakeAhead), which waitTurn then waits: an ask made
// exactly at the turn is late by its own latency, and a late ask loses that
// time (a job with a deadline or a heartbeat, which the take leaves to the
// drainer, drained 6.5 % under a 50/s rate so). Every ask, the first and each after a wait or an error, uses the
// tenant's current outflow (currentOutflow), and SetTenants cuts its wait or
// error pause short, so a rate or capacity changed there reaches a job
// already waiting at once, and a lane stuck on a limit the script refuses
// recovers as soon as the limit is fixed (an override changed in Redis is
// seen at the next ask, within outflowWaitMax or the error pause). It
// returns the outflow of its last ask, and flowGo with the send time of
// the turn on the bucket's clock (sendClock; zero when not known);
// flowStop when ctx is done first; flowRemoved when the tenant was removed meanwhile; flowPaused when
// it was paused (the job takes no turn); flowNever with
// the capacity the script used when the job's cost exceeds it
// (outflow.Result.Never): that job can never pass. Backend errors, and
// replies the bucket's Go twin refuses, pause with errorBackoff and retry:
// the job stays leased meanwhile.
func (d *Drainer) waitTurn(ctx context.Context, job *queue.Claimed) (flow, float64, outflow.Limit, time.Time) {
	tenant := job.Envelope.Tenant
	start := d.clock.Now()
	var pause errorBackoff
	for {
		changed := d.tenantsChanged()
		o, ok := d.currentOutflow(tenant)
		switch {
		case ctx.Err() != nil:
			return flowStop, 0, o, time.Time{}
		case !ok:
			return flowRemoved, 0, o, time.Time{}
		case d.paused(tenant):
			return flowPaused, 0, o, time.Time{}
		case !o.Shaped():
			return flowGo, 0, o, time.Time{}
		}
		res, err := d.bucket.TakeAhead(ctx, tenant, o, job.Envelope.Cost, turnAhead)
		answered := time.Now()
		if err != nil {
			if !d.pauseAfter(ctx, &pause, changed, "outflow", "drainer: outflow bucket", tenant, err) {
				return flowStop, 0, o, time.Time{}
			}
			continue
		}
		pause.reset()
		if res.Never {
			return flowNever, res.Capacity, o, time.Time{}
		}
		d.setBucketGauges(tenant, res.Water, res.Rate, o.Rate)
		if res.Allowed {
			d.sends.observe(answered, res.At)
			d.m.outflowWaits.Observe((d.clock.Now().Sub(start) + res.Delay).Seconds())
			if !sleep(ctx, time.Until(answered.Add(res.Delay))) {
				return flowStop, 0, o, time.Time{} // the turn is spent; the job goes back
			}
			return flowGo, 0, o, d.sends.sendAt(res.At, res.Delay)
		}
		if !sleepOrChange(ctx, turnSleep(res.Wait), changed) {
			return flowStop, 0, o, time.Time{}
		}
	}
}

// setBucketGauges sets the tenant's bucket gauges from an answer: its water
// level, the effective rate the script used and the configured one.
func (d *Drainer) setBucketGauges(tenant string, water, effective, configured float64) {
	lbl := d.label(tenant)
	d.m.water.WithLabelValues(lbl).Set(water)
	d.m.effective.WithLabelValues(lbl).Set(effective)
	d.m.configured.WithLabelValues(lbl).Set(configured)
}

// pauseAfter counts and logs a failed backend call of a waiting job (op is
// its sluice_drainer_errors_total label) and sleeps the loop's next error
// pause, cut short by changed. It reports whether ctx is still live (false
// at once when the error came from ctx ending).
func (d *Drainer) pauseAfter(ctx context.Context, pause *errorBackoff, changed <-chan struct{}, op, msg, tenant string, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	d.m.errors.WithLabelValues(op).Inc()
	p := pause.next()
	d.log.Warn(msg, "tenant", tenant, "err", err, "pause", p.String())
	return sleepOrChange(ctx, p, changed)
}

// acquireSlot takes one of the tenant's concurrency slots (outflow.Semaphore,
// shared by all drainers; a dead drainer's slots expire with their lease).
// Every ask uses the tenant's current concurrency cap (currentOutflow), and
// SetTenants cuts a pause short, as in waitTurn. It reports whether it
// holds a slot (false when the tenant has no cap now) and flowGo, or
// flowStop when ctx is done first, or flowRemoved when the tenant was
// removed meanwhile, or flowPaused (no slot taken) when it was paused. Errors and replies the Go twin refuses (a wait below
// 1 ms) pause with errorBackoff.
func (d *Drainer) acquireSlot(ctx context.Context, job *queue.Claimed) (bool, flow) {
	tenant := job.Envelope.Tenant
	var pause errorBackoff
	for {
		changed := d.tenantsChanged()
		o, ok := d.currentOutflow(tenant)
		switch {
		case ctx.Err() != nil:
			return false, flowStop
		case !ok:
			return false, flowRemoved
		case d.paused(tenant):
			return false, flowPaused
		case o.Concurrency <= 0:
			return false, flowGo
		}
		held, wait, err := d.slots.Acquire(ctx, tenant, o.Concurrency, job.Token(), d.cfg.Settings.Lease)
		if err != nil {
			if !d.pauseAfter(ctx, &pause, changed, "semaphore", "drainer: concurrency slot", tenant, err) {
				return false, flowStop
			}
			continue
		}
		pause.reset()
		if held {
			return true, flowGo
		}
		// A slot frees when a holder finishes (any drainer) or expires;
		// poll, but no later than the earliest expiry.
		if !sleepOrChange(ctx, min(wait, 50*time.Millisecond), changed) {
			return false, flowStop
		}
	}
}

// releaseSlot gives the job's concurrency slot back when it holds one
// (acquireSlot's answer). An error leaves the slot to expire with its lease.
func (d *Drainer) releaseSlot(job *queue.Claimed, slot bool) {
	if !slot {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := d.slots.Release(ctx, job.Envelope.Tenant, job.Token()); err != nil {
		d.m.errors.WithLabelValues("semaphore").Inc()
		d.log.Warn("drainer: release concurrency slot", "tenant", job.Envelope.Tenant, "err", err)
	}
}

// decrease lowers the tenant's shared effective rate after a 429/503
// (outflow.Bucket.Decrease).
func (d *Drainer) decrease(tenant string, o outflow.Limit) {
	if !o.Shaped() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	res, err := d.bucket.Decrease(ctx, tenant, o)
	if err != nil {
		d.m.errors.WithLabelValues("adapt").Inc()
		d.log.Warn("drainer: lower adaptive rate", "tenant", tenant, "err", err)
		return
	}
	d.m.effective.WithLabelValues(d.label(tenant)).Set(res.Rate)
	if res.Changed {
		d.log.Info("drainer: downstream overloaded; effective rate lowered", "tenant", tenant, "effective_rate", res.Rate)
	}
}
