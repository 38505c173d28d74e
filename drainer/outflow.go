package drainer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// Adaptive outflow (AIMD) constants. A downstream 429/503 multiplies the
// tenant's effective rate by adaptFactor (not more often than once per
// adaptCooldown, whatever the number of jobs in flight), down to the floor;
// it then climbs back by rate × adaptRecovery per second to the configured
// rate (from the floor to the full rate in at most 1/adaptRecovery s).
const (
	adaptFactor   = 0.5
	adaptCooldown = time.Second
	adaptRecovery = 0.1
)

// outflow is a tenant's outflow configuration with defaults applied.
type outflow struct {
	shaped      bool              // config.Outflow.Shaped: limit applies
	limit       limits.LeakyLimit // when shaped
	concurrency int               // 0: no cap
	adaptive    bool
	floor       float64
}

// outflowOf applies config.Outflow's defaults (WithDefaults: unlimited
// without a rate, capacity max(1, Rate), adaptive on, min_rate Rate/10).
func outflowOf(c config.Outflow) outflow {
	adaptive := c.AdaptiveOn()
	c.Adaptive = &adaptive // set, so WithDefaults allocates none on every ask
	c = c.WithDefaults()
	return outflow{
		shaped:      c.Shaped(),
		limit:       limits.LeakyLimit{Rate: c.Rate, Capacity: c.Capacity},
		concurrency: c.Concurrency,
		adaptive:    c.AdaptiveOn(),
		floor:       c.MinRate,
	}
}

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

// flow is waitOutflow's and acquireSlot's answer.
type flow int

const (
	flowGo      flow = iota // the job may go now
	flowStop                // ctx is done
	flowNever               // the job's cost exceeds the bucket's capacity
	flowRemoved             // the tenant is no longer configured
)

// currentOutflow is the tenant's outflow as the drainer's configuration
// holds it now (SetTenants). ok is false when the tenant was removed (and
// unconfigured tenants are not drained); an unconfigured tenant drained by
// DiscoverUnconfigured has the zero outflow (unlimited).
func (d *Drainer) currentOutflow(tenant string) (o outflow, ok bool) {
	tn, ok := d.tenant(tenant)
	if !ok && !d.cfg.DiscoverUnconfigured {
		return outflow{}, false
	}
	return outflowOf(tn.Outflow), true
}

// waitOutflow waits until the tenant's shared bucket lets job go, asking
// again after each returned wait (another drainer may take the slot). Every
// ask, the first and each after a wait or an error, uses the tenant's
// current outflow (currentOutflow), and SetTenants cuts its wait or error
// pause short, so a rate or capacity changed there reaches a job already
// waiting at once, and a lane stuck on a limit the script refuses recovers
// as soon as the limit is fixed (an override changed in Redis is seen at the
// next ask, within outflowWaitMax or the error pause). It returns the outflow
// of its last ask, and flowGo; flowStop when ctx is done first; flowRemoved
// when the tenant was removed meanwhile; flowNever with the capacity the
// script used when the job's cost exceeds it (limits.LeakyResult.Never):
// that job can never pass. Backend errors, and replies the bucket's Go twin
// refuses, pause with errorBackoff and retry: the job stays leased
// meanwhile.
func (d *Drainer) waitOutflow(ctx context.Context, job *queue.Claimed) (flow, float64, outflow) {
	tenant := job.Envelope.Tenant
	lbl := d.label(tenant)
	start := time.Now()
	var pause errorBackoff
	for {
		changed := d.tenantsChanged()
		o, ok := d.currentOutflow(tenant)
		switch {
		case ctx.Err() != nil:
			return flowStop, 0, o
		case !ok:
			return flowRemoved, 0, o
		case !o.shaped:
			return flowGo, 0, o
		}
		res, err := d.leaky.Take(ctx, tenant, o.limit, job.Envelope.Cost)
		if err != nil {
			if ctx.Err() != nil {
				return flowStop, 0, o
			}
			d.m.errors.WithLabelValues("outflow").Inc()
			p := pause.next()
			d.log.Warn("drainer: outflow bucket", "tenant", tenant, "err", err, "pause", p.String())
			if !sleepOrChange(ctx, p, changed) {
				return flowStop, 0, o
			}
			continue
		}
		pause.reset()
		if res.Never {
			return flowNever, res.Capacity, o
		}
		d.m.water.WithLabelValues(lbl).Set(res.Water)
		d.m.effective.WithLabelValues(lbl).Set(res.Rate)
		d.m.configured.WithLabelValues(lbl).Set(o.limit.Rate)
		if res.Allowed {
			d.m.outflowWaits.Observe(time.Since(start).Seconds())
			return flowGo, 0, o
		}
		if !sleepOrChange(ctx, min(max(res.Wait, outflowWaitMin), outflowWaitMax), changed) {
			return flowStop, 0, o
		}
	}
}

// acquireSlot takes one of the tenant's concurrency slots (a lease-based
// semaphore in Redis shared by all drainers; a dead drainer's slots expire
// with their lease). Every ask uses the tenant's current concurrency cap
// (currentOutflow), and SetTenants cuts a pause short, as in waitOutflow. It reports whether it
// holds a slot (false when the tenant has no cap now) and flowGo, or
// flowStop when ctx is done first, or flowRemoved when the tenant was
// removed meanwhile. Errors and replies of another shape (a wait below
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
		case o.concurrency <= 0:
			return false, flowGo
		}
		res, err := lua.SemaphoreAcquire.Run(ctx, d.cfg.Redis, []string{keys.Inflight(tenant)},
			o.concurrency, job.Token(), d.cfg.Settings.Lease.Milliseconds(), 0).Int64Slice()
		switch {
		case err != nil:
		case len(res) != 2:
			err = fmt.Errorf("reply has %d values, want 2", len(res))
		case res[0] != 0 && res[0] != 1, res[0] == 0 && res[1] < 1:
			err = fmt.Errorf("reply %v, want {1, 0} or {0, wait_ms >= 1}", res)
		}
		if err != nil {
			if ctx.Err() != nil {
				return false, flowStop
			}
			d.m.errors.WithLabelValues("semaphore").Inc()
			p := pause.next()
			d.log.Warn("drainer: concurrency slot", "tenant", tenant, "err", err, "pause", p.String())
			if !sleepOrChange(ctx, p, changed) {
				return false, flowStop
			}
			continue
		}
		pause.reset()
		if res[0] == 1 {
			return true, flowGo
		}
		// A slot frees when a holder finishes (any drainer) or expires;
		// poll, but no later than the earliest expiry.
		if !sleepOrChange(ctx, time.Duration(min(res[1], 50))*time.Millisecond, changed) {
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
	if err := lua.SemaphoreRelease.Run(ctx, d.cfg.Redis, []string{keys.Inflight(job.Envelope.Tenant)}, job.Token()).Err(); err != nil {
		d.m.errors.WithLabelValues("semaphore").Inc()
		d.log.Warn("drainer: release concurrency slot", "tenant", job.Envelope.Tenant, "err", err)
	}
}

// decrease lowers the tenant's shared effective rate after a 429/503.
func (d *Drainer) decrease(tenant string, o outflow) {
	if !o.shaped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	res, err := lua.DrainAdapt.Run(ctx, d.cfg.Redis, []string{keys.Water(tenant), keys.Override(tenant)},
		fmtFloat(o.limit.Rate), fmtFloat(o.floor), fmtFloat(adaptFactor), fmtFloat(o.limit.Rate*adaptRecovery),
		adaptCooldown.Milliseconds(), 0, limits.LeakyMargin.Milliseconds()).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("reply has %d values, want 2", len(res))
	}
	if err != nil {
		d.m.errors.WithLabelValues("adapt").Inc()
		d.log.Warn("drainer: lower adaptive rate", "tenant", tenant, "err", err)
		return
	}
	rate := float64(res[0]) / 1000
	d.m.effective.WithLabelValues(d.label(tenant)).Set(rate)
	if res[1] == 1 {
		d.log.Info("drainer: downstream overloaded; effective rate lowered", "tenant", tenant, "effective_rate", rate)
	}
}

// EffectiveRate returns the effective outflow rate now of a tenant whose
// outflow is o, as every drainer computes it: the override rate
// (keys.Override outflow_rate, when > 0; 0 there is no override, never
// unlimited) or o.Rate, lowered by adaptive backoff while it recovers. It is
// meant for an admin API. An outflow that is not o.Shaped() has no rate: ok
// is false and nothing is read.
func EffectiveRate(ctx context.Context, rdb redis.UniversalClient, tenant string, o config.Outflow) (rate float64, ok bool, err error) {
	if !o.Shaped() {
		return 0, false, nil
	}
	r, err := effectiveRate(ctx, rdb, tenant, o.Rate)
	return r, err == nil, err
}

func effectiveRate(ctx context.Context, rdb redis.UniversalClient, tenant string, configured float64) (float64, error) {
	ov := rdb.HGet(ctx, keys.Override(tenant), "outflow_rate")
	st := rdb.HMGet(ctx, keys.Water(tenant), "eff", "eff_ts", "eff_inc")
	now := rdb.Time(ctx)
	rate := configured
	if v, err := ov.Float64(); err == nil && v > 0 {
		rate = v
	} else if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("drainer: effective rate of %s: %w", tenant, err)
	}
	vals, err := st.Result()
	if err != nil {
		return 0, fmt.Errorf("drainer: effective rate of %s: %w", tenant, err)
	}
	t, err := now.Result()
	if err != nil {
		return 0, fmt.Errorf("drainer: effective rate of %s: %w", tenant, err)
	}
	num := func(v any) (float64, bool) {
		s, ok := v.(string)
		if !ok {
			return 0, false
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil
	}
	eff, ok := num(vals[0])
	if !ok || eff <= 0 || rate <= 0 {
		return rate, nil
	}
	// As leaky_bucket.lua: a missing eff_ts is now (no recovery yet), a
	// missing eff_inc no recovery.
	since := 0.0
	if ts, ok := num(vals[1]); ok {
		since = max(float64(t.UnixMicro())-ts, 0) / 1e6
	}
	inc, _ := num(vals[2])
	return min(rate, eff+since*inc), nil
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
