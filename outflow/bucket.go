package outflow

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// Margin is keys.WaterMargin: added to the PX TTL of a water-level Hash
// beyond the time the bucket takes to empty.
const Margin = keys.WaterMargin

// micro is the number of micro-units in one unit of water.
const micro = 1_000_000

// Result is the answer of one Bucket.Take.
type Result struct {
	// Allowed says the job takes its turn now; its cost was added to the
	// water.
	Allowed bool
	// Never says the job's cost exceeds the capacity the script used (the
	// override or configured): it can never pass, and nothing was written.
	// Allowed is false and Wait 0.
	Never bool
	// Wait is how long until the job would be allowed (0 when Allowed or
	// Never, at least 1µs otherwise, at most an hour: the script caps it).
	// Other drainers may take their turn first, so the caller asks again
	// after it.
	Wait time.Duration
	// Water is the level after the call, in units.
	Water float64
	// Rate is the rate the script used: the override or configured rate,
	// lowered to the adaptive effective rate when that is smaller.
	Rate float64
	// Capacity is the capacity the script used (override or configured).
	Capacity float64
	// Delay is, for a turn granted ahead (TakeAhead), how long after the
	// answer the job is sent: its cost is in the water now, so no send is
	// early. 0 for a turn free now, and when not Allowed.
	Delay time.Duration
	// At is the bucket's clock when it answered (Redis TIME, or TakeAt's
	// now; its last write's time when the call is behind it): the turn
	// falls at At + Delay on that clock, which the drainer maps to its own
	// to send on the bucket's clock.
	At time.Time
}

// MaxAhead bounds TakeAhead's ahead (the script refuses more).
const MaxAhead = 10 * time.Second

// Bucket is the shared outflow leaky bucket of every tenant, kept as a
// water-level Hash {water, ts} per tenant in Redis (keys.Water) and updated by
// one Lua script (lua/leaky_bucket.lua) per call:
//
//	leaked = (now − ts) × rate
//	water  = max(0, water − leaked)
//	a job of cost c > capacity never goes (Never; nothing written)
//	a job of cost c goes when water + c ≤ capacity; water += c
//	otherwise wait = (water + c − capacity) ÷ rate
//
// where rate is the effective rate (Limit.At). The script refuses, with an
// error and no write, numbers it cannot hold exactly in micro-units
// (rate × 1000 or capacity × 10^6 not below 2^53, a NaN or infinite one, a
// stored water or ts out of range), and caps the key's TTL at 30 days, so
// no call leaves the key without one.
//
// Water is kept in integer micro-units. Every drainer instance calls the same
// script on the same key, so a tenant's total outflow is its rate however
// many drainers run: over any interval T at most rate × T + capacity units
// leave. The clock is Redis TIME (Take) unless the caller passes now
// (TakeAt, for tests). The key's PX TTL is the time the bucket takes to
// empty plus Margin. Bucket is safe for concurrent use.
type Bucket struct {
	rdb redis.Scripter
}

// NewBucket returns the bucket on rdb (a Client, ClusterClient or Ring).
func NewBucket(rdb redis.Scripter) *Bucket { return &Bucket{rdb: rdb} }

// Take asks whether a job of cost units of tenant may take its turn now, by
// Redis TIME, and adds its cost to the water when it may. lim must be
// Shaped.
func (b *Bucket) Take(ctx context.Context, tenant string, lim Limit, cost int64) (Result, error) {
	return b.take(ctx, tenant, lim, cost, 0, 0)
}

// TakeAhead is Take that also grants a turn due within ahead (at most
// MaxAhead): Allowed, with Result.Delay the wait before the send, so an ask
// made a little before the turn takes it at its own time and the ask's
// latency is not lost (a late ask finds the bucket only empty, never
// fuller).
func (b *Bucket) TakeAhead(ctx context.Context, tenant string, lim Limit, cost int64, ahead time.Duration) (Result, error) {
	if ahead < 0 || ahead > MaxAhead {
		return Result{}, fmt.Errorf("outflow: take %s: ahead %v must be in [0, %v]", tenant, ahead, MaxAhead)
	}
	return b.take(ctx, tenant, lim, cost, 0, ahead)
}

// TakeAt is Take at the instant now instead of Redis TIME, for deterministic
// tests and replays. Callers must not mix TakeAt and Take on one tenant.
func (b *Bucket) TakeAt(ctx context.Context, tenant string, lim Limit, cost int64, now time.Time) (Result, error) {
	us := now.UnixMicro()
	if us <= 0 {
		return Result{}, fmt.Errorf("outflow: take %s: now %v is not after the epoch", tenant, now)
	}
	return b.take(ctx, tenant, lim, cost, us, 0)
}

func (b *Bucket) take(ctx context.Context, tenant string, lim Limit, cost int64, nowUS int64, ahead time.Duration) (Result, error) {
	if !(lim.Rate > 0) || !(lim.Capacity > 0) || math.IsInf(lim.Rate, 0) || math.IsInf(lim.Capacity, 0) {
		return Result{}, fmt.Errorf("outflow: take %s: rate %v and capacity %v must be > 0", tenant, lim.Rate, lim.Capacity)
	}
	if cost < 1 {
		return Result{}, fmt.Errorf("outflow: take %s: cost %d must be >= 1", tenant, cost)
	}
	v, err := takeCall(tenant, lim, cost, nowUS, ahead).Run(ctx, b.rdb).Result()
	if err != nil {
		return Result{}, fmt.Errorf("outflow: take %s: %w", tenant, err)
	}
	res, err := parseTake(v)
	if err != nil {
		return Result{}, fmt.Errorf("outflow: take %s: %w", tenant, err)
	}
	return res, nil
}

// takeCall is leaky_bucket.lua's call: KEYS water and override hashes,
// ARGV rate, capacity, cost, now (µs, 0: Redis TIME), TTL margin (ms), how
// far ahead a turn may be granted (µs).
func takeCall(tenant string, lim Limit, cost, nowUS int64, ahead time.Duration) lua.Call {
	return lua.Call{
		Script: lua.LeakyBucket,
		Keys:   []string{keys.Water(tenant), keys.Override(tenant)},
		Args:   []any{fmtFloat(lim.Rate), fmtFloat(lim.Capacity), cost, nowUS, Margin.Milliseconds(), ahead.Microseconds()},
	}
}

// parseTake reads leaky_bucket.lua's reply {allowed, wait_us, water_micro,
// rate_milli, capacity_micro, delay_us, now_us}, refusing one the script
// never gives: not seven integers, a clock not after the epoch, an allowed outside {-1, 0, 1}, a wait that is not
// ≥ 1µs when the job must wait (or not 0 otherwise) or does not fit a
// time.Duration, a negative level, rate or capacity, a delay outside
// [0, MaxAhead] or with a job not allowed. Its error wraps
// lua.ErrReply, so the caller backs off as after any error instead of
// trusting a value such as a wait of 0.
func parseTake(v any) (Result, error) {
	s := lua.LeakyBucket
	res, err := s.Ints(v, 7)
	if err != nil {
		return Result{}, err
	}
	allowed, wait := res[0], res[1]
	switch {
	case allowed < -1 || allowed > 1:
		return Result{}, s.ReplyError("allowed %d", allowed)
	case allowed == 0 && (wait < 1 || wait > math.MaxInt64/int64(time.Microsecond)):
		return Result{}, s.ReplyError("wait %dµs", wait)
	case allowed != 0 && wait != 0:
		return Result{}, s.ReplyError("allowed %d with wait %dµs", allowed, wait)
	case res[2] < 0 || res[3] < 0 || res[4] < 0:
		return Result{}, s.ReplyError("negative level, rate or capacity %v", res[2:5])
	case res[5] < 0 || res[5] > MaxAhead.Microseconds() || (res[5] > 0 && allowed != 1):
		return Result{}, s.ReplyError("delay %dµs (allowed %d)", res[5], allowed)
	case res[6] <= 0:
		return Result{}, s.ReplyError("clock %dµs, want after the epoch", res[6])
	}
	return Result{
		Allowed:  allowed == 1,
		Never:    allowed == -1,
		Wait:     time.Duration(wait) * time.Microsecond,
		Water:    float64(res[2]) / micro,
		Rate:     float64(res[3]) / 1000,
		Capacity: float64(res[4]) / micro,
		Delay:    time.Duration(res[5]) * time.Microsecond,
		At:       time.UnixMicro(res[6]),
	}, nil
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
