package limits

import (
	"math"
	"sync"
	"time"
)

// Local is an in-process token bucket for one tenant's policy, the rough
// bound ingest applies while Redis cannot be reached and the tenant fails
// open. Whatever the policy's algorithm, it holds Policy.Capacity() units
// (Burst for gcra and token_bucket, Limit otherwise), refilled at Limit per
// Period, starting full:
//
//	tokens = min(capacity, tokens + (now − last) × Limit / Period)
//	a request of n units passes when tokens ≥ n; then tokens −= n
//
// It is rough on purpose: each ingest instance keeps its own, so k instances
// together admit up to k times the limit, and nothing is shared with Redis
// when it comes back. Time is the caller's now, so tests need no sleeping; a
// now earlier than the last one refills nothing. Local is safe for
// concurrent use.
type Local struct {
	name     string
	capacity float64 // units
	perNano  float64 // units refilled per nanosecond

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewLocal returns a full Local bucket for p. A p that fails Validate (no
// positive Limit or Period) yields a bucket that refuses everything.
func NewLocal(p Policy) *Local {
	l := &Local{name: p.Name, capacity: float64(p.Capacity())}
	if p.Limit > 0 && p.Period > 0 {
		l.perNano = float64(p.Limit) / float64(p.Period)
	} else {
		l.capacity = 0
	}
	l.tokens = l.capacity
	return l
}

// AllowN takes n units (0 means 1) at now when the bucket holds them, and
// reports the result in the same terms as an Admitter's.
func (l *Local) AllowN(now time.Time, n int64) Result {
	if n <= 0 {
		n = 1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.After(l.last) {
		l.tokens = min(l.capacity, l.tokens+float64(now.Sub(l.last))*l.perNano)
	}
	if l.last.IsZero() || now.After(l.last) {
		l.last = now
	}
	need := float64(n)
	r := Result{Policy: l.name, Limit: int64(l.capacity)}
	switch {
	case l.tokens >= need:
		l.tokens -= need
		r.Allowed = true
	case need > l.capacity || l.perNano == 0:
		r.RetryAfter = Never
	default:
		r.RetryAfter = l.dur(need - l.tokens)
	}
	r.Remaining = int64(l.tokens)
	r.ResetAfter = l.dur(l.capacity - l.tokens)
	return r
}

// dur is the time the bucket takes to refill units, rounded up to the µs.
func (l *Local) dur(units float64) time.Duration {
	if units <= 0 || l.perNano == 0 {
		return 0
	}
	return time.Duration(math.Ceil(units/l.perNano/1e3)) * time.Microsecond
}
