package limits

import "context"

// SlidingLog keeps the instant of every admitted unit in a sorted set
// (keys.Admission) and admits a request of n units at now when
//
//	|{ s : now − Period < s ≤ now }| + n ≤ Limit
//
// It is exact — no boundary effect, no estimate — at the price of one
// member per admitted unit (Limit ≤ MaxLogLimit). A request of n units adds n
// distinct members ("<now>:<seq>"); expired members are removed only when a
// request is admitted, so a refusal writes nothing; the set's PX TTL is
// Period from its newest member. RetryAfter on refusal is the time until
// enough of the oldest members leave the window, or Never when n > Limit.
// Burst is ignored.
//
// It is safe for concurrent use.
type SlidingLog struct{ s single }

// NewSlidingLog returns the SlidingLog limiter of policy p (its Algorithm is set to
// AlgSlidingLog) on a. p should pass Validate; AllowN reports an invalid one.
func NewSlidingLog(a *Admitter, p Policy) *SlidingLog {
	return &SlidingLog{s: newSingle(a, p, AlgSlidingLog)}
}

// AllowN asks whether n units (0 means 1) of tenant may pass now, by Redis
// TIME, and takes them when they may. A refusal changes no state.
func (l *SlidingLog) AllowN(ctx context.Context, tenant string, n int64) (Result, error) {
	return l.s.AllowN(ctx, tenant, n)
}

// Policy returns the enforced policy.
func (l *SlidingLog) Policy() Policy { return l.s.p }
