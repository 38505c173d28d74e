// Package outflow owns a tenant's outflow: how fast, how bursty and how
// many at once its jobs may leave for the downstream, across every drainer.
//
//   - Limit is the outflow as configured, with config's defaults applied
//     (Of): rate, bucket capacity, adaptive floor, adaptive on or off,
//     concurrency cap.
//   - Bucket is the shared leaky bucket (lua/leaky_bucket.lua): a job takes
//     its turn when the water plus its cost fits the capacity.
//   - Bucket.Decrease is the adaptive decrease after a downstream 429/503
//     (lua/drain_adapt.lua); the recovery is part of every Take.
//   - Semaphore is the concurrency cap: a "slot" is one place in it
//     (lua/semaphore_acquire.lua, semaphore_release.lua, lease_extend.lua).
//   - Limit.At is the one Go copy of the scripts' formulas for the
//     effective rate and the water level at an instant, for readers of the
//     stored state (ingest's stats).
//
// The scripts are the authority inside Redis; each has its Go twin here:
// typed arguments building the lua.Call and a reply parser whose errors
// wrap lua.ErrReply. Time is an argument at the script boundary: the zero
// instant means Redis TIME, which production passes.
package outflow

import "github.com/sluicehq/sluice/config"

// Limit is a tenant's outflow limit, resolved: config's defaults are
// applied (Of), so no field has a default of its own here.
type Limit struct {
	// Rate is units per second across all drainers; 0 is unlimited (no
	// bucket, no adaptive rate). The keys.Override field outflow_rate, when
	// positive, replaces it in the scripts.
	Rate float64
	// Capacity is the bucket's size in units, > 0 when Rate is (with
	// Capacity × 10^6 < 2^53): the largest burst. A job whose cost exceeds
	// it never leaves (Result.Never). The keys.Override field
	// outflow_capacity, when positive, replaces it in the scripts.
	Capacity float64
	// MinRate is the floor of the adaptive rate, units per second.
	MinRate float64
	// Adaptive says a downstream 429/503 lowers the rate (Bucket.Decrease).
	Adaptive bool
	// Concurrency caps the jobs in flight across all drainers (Semaphore);
	// 0 is no cap.
	Concurrency int
}

// Of resolves a configured outflow: config.Outflow.WithDefaults (unlimited
// without a rate, capacity max(1, rate), min_rate rate ÷ 10, adaptive on),
// and an outflow that is not config.Outflow.Shaped has Rate, Capacity and
// MinRate 0. It allocates nothing.
func Of(c config.Outflow) Limit {
	adaptive := c.AdaptiveOn()
	c.Adaptive = &adaptive // set, so WithDefaults allocates none
	c = c.WithDefaults()
	l := Limit{Adaptive: adaptive, Concurrency: c.Concurrency}
	if c.Shaped() {
		l.Rate, l.Capacity, l.MinRate = c.Rate, c.Capacity, c.MinRate
	}
	return l
}

// Shaped reports whether the limit has a rate (and so a bucket).
func (l Limit) Shaped() bool { return l.Rate > 0 }
