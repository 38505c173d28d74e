package limits

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// LeakyMargin is added to the PX TTL of a water-level Hash beyond the time
// the bucket takes to empty, so an idle tenant's state (and its adaptive
// rate) outlives short pauses and still disappears when the tenant stops.
const LeakyMargin = 60 * time.Second

// leakyMicro is the number of micro-units in one unit of water.
const leakyMicro = 1_000_000

// LeakyLimit is a tenant's configured outflow: Rate units per second leave a
// bucket of Capacity units. Override fields "outflow_rate" and
// "outflow_capacity" in the tenant's keys.Override hash, when present and
// positive, replace them at the next call on every drainer.
type LeakyLimit struct {
	// Rate is units per second, > 0.
	Rate float64
	// Capacity is the bucket size in units, > 0, with Capacity × 10^6 < 2^53.
	// A job may leave as soon as water + cost ≤ Capacity, so Capacity is the
	// largest burst; a job whose cost exceeds it never leaves (Never).
	Capacity float64
}

// LeakyResult is the answer of one Leaky.Take.
type LeakyResult struct {
	// Allowed says whether the job may go now; its cost was added to the water.
	Allowed bool
	// Never says the job's cost exceeds the capacity the script used (the
	// override or configured): it can never pass, and nothing was written.
	// Allowed is false and Wait 0.
	Never bool
	// Wait is how long until the job would be allowed (0 when Allowed or
	// Never, at least 1µs otherwise, at most an hour: the script caps it).
	// Other drainers may take the slot first, so the caller asks again
	// after it.
	Wait time.Duration
	// Water is the level after the call, in units.
	Water float64
	// Rate is the rate the script used: the override or configured rate,
	// lowered to the adaptive effective rate when that is smaller.
	Rate float64
	// Capacity is the capacity the script used (override or configured).
	Capacity float64
}

// Leaky is the shared outflow leaky bucket of every tenant, kept as a
// water-level Hash {water, ts} per tenant in Redis (keys.Water) and updated by
// one Lua script (lua/leaky_bucket.lua) per call:
//
//	leaked = (now − ts) × rate
//	water  = max(0, water − leaked)
//	a job of cost c > capacity never goes (Never; nothing written)
//	a job of cost c goes when water + c ≤ capacity; water += c
//	otherwise wait = (water + c − capacity) ÷ rate
//
// The script refuses, with an error and no write, numbers it cannot hold
// exactly in micro-units (rate × 1000 or capacity × 10^6 not below 2^53, a
// NaN or infinite one, a stored water or ts out of range), and caps the
// key's TTL at 30 days, so no call leaves the key without one.
//
// Water is kept in integer micro-units. Every drainer instance calls the same
// script on the same key, so a tenant's total outflow is its rate however
// many drainers run: over any interval T at most rate × T + capacity units
// leave. The clock is Redis TIME (Take) unless the caller passes now
// (TakeAt, for tests). The key's PX TTL is the time the bucket takes to
// empty plus LeakyMargin. Leaky is safe for concurrent use.
type Leaky struct {
	rdb redis.Scripter
}

// NewLeaky returns the bucket on rdb (a Client, ClusterClient or Ring).
func NewLeaky(rdb redis.Scripter) *Leaky { return &Leaky{rdb: rdb} }

// Take asks whether a job of cost units of tenant may leave now, by Redis
// TIME, and adds its cost to the water when it may.
func (l *Leaky) Take(ctx context.Context, tenant string, lim LeakyLimit, cost int64) (LeakyResult, error) {
	return l.take(ctx, tenant, lim, cost, 0)
}

// TakeAt is Take at the instant now instead of Redis TIME, for deterministic
// tests and replays. Callers must not mix TakeAt and Take on one tenant.
func (l *Leaky) TakeAt(ctx context.Context, tenant string, lim LeakyLimit, cost int64, now time.Time) (LeakyResult, error) {
	us := now.UnixMicro()
	if us <= 0 {
		return LeakyResult{}, fmt.Errorf("limits: leaky take %s: now %v is not after the epoch", tenant, now)
	}
	return l.take(ctx, tenant, lim, cost, us)
}

func (l *Leaky) take(ctx context.Context, tenant string, lim LeakyLimit, cost int64, nowUS int64) (LeakyResult, error) {
	if !(lim.Rate > 0) || !(lim.Capacity > 0) || math.IsInf(lim.Rate, 0) || math.IsInf(lim.Capacity, 0) {
		return LeakyResult{}, fmt.Errorf("limits: leaky take %s: rate %v and capacity %v must be > 0", tenant, lim.Rate, lim.Capacity)
	}
	if cost < 1 {
		return LeakyResult{}, fmt.Errorf("limits: leaky take %s: cost %d must be >= 1", tenant, cost)
	}
	res, err := lua.LeakyBucket.Run(ctx, l.rdb,
		[]string{keys.Water(tenant), keys.Override(tenant)},
		strconv.FormatFloat(lim.Rate, 'f', -1, 64),
		strconv.FormatFloat(lim.Capacity, 'f', -1, 64),
		cost, nowUS, LeakyMargin.Milliseconds(),
	).Int64Slice()
	if err != nil {
		return LeakyResult{}, fmt.Errorf("limits: leaky take %s: %w", tenant, err)
	}
	if len(res) != 5 {
		return LeakyResult{}, fmt.Errorf("limits: leaky take %s: %w: %d values, want 5", tenant, errLeakyReply, len(res))
	}
	if err := checkLeakyReply(res); err != nil {
		return LeakyResult{}, fmt.Errorf("limits: leaky take %s: %w", tenant, err)
	}
	return LeakyResult{
		Allowed:  res[0] == 1,
		Never:    res[0] == -1,
		Wait:     time.Duration(res[1]) * time.Microsecond,
		Water:    float64(res[2]) / leakyMicro,
		Rate:     float64(res[3]) / 1000,
		Capacity: float64(res[4]) / leakyMicro,
	}, nil
}

// checkLeakyReply refuses a reply the script never gives: an allowed
// outside {-1, 0, 1}, a wait that is not ≥ 1µs when the job must wait (or
// not 0 otherwise) or does not fit a time.Duration, a negative level, rate
// or capacity. Its error wraps errLeakyReply, so the caller backs off as
// after any error instead of trusting a value such as a wait of 0.
func checkLeakyReply(res []int64) error {
	allowed, wait := res[0], res[1]
	switch {
	case allowed < -1 || allowed > 1:
		return fmt.Errorf("%w: allowed %d", errLeakyReply, allowed)
	case allowed == 0 && (wait < 1 || wait > math.MaxInt64/int64(time.Microsecond)):
		return fmt.Errorf("%w: wait %dµs", errLeakyReply, wait)
	case allowed != 0 && wait != 0:
		return fmt.Errorf("%w: allowed %d with wait %dµs", errLeakyReply, allowed, wait)
	case res[2] < 0 || res[3] < 0 || res[4] < 0:
		return fmt.Errorf("%w: negative level, rate or capacity %v", errLeakyReply, res[2:])
	}
	return nil
}

// errLeakyReply marks a script reply of an unexpected shape.
var errLeakyReply = errors.New("unexpected script reply")
