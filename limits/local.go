package limits

import (
	"sync"
	"time"
)

// Local is an in-process GCRA for one tenant's policy, the rough bound
// ingest applies while Redis cannot be reached and the tenant fails open. It
// uses the formula of GCRA over an int64 TAT in nanoseconds, whatever the
// policy's algorithm: with T = ⌈Period / Limit⌉ and τ = Capacity() × T
// (Capacity is Burst for gcra and token_bucket, Limit otherwise), a request
// of n units at now
//
//	TAT' = max(TAT, now) + n × T
//	passes when TAT' − now ≤ τ, and then TAT := TAT'
//
// so Capacity units pass at once from idle and Limit per Period in the long
// run. It is rough on purpose: each ingest instance keeps its own, so k
// instances together admit up to k times the limit, and nothing is shared
// with Redis when it comes back. Time is the caller's now, so tests need no
// sleeping. Local is safe for concurrent use.
type Local struct {
	name     string
	capacity int64
	t, tau   int64 // ns; t == 0: refuse everything

	mu  sync.Mutex
	tat int64 // unix ns; 0: idle
}

// NewLocal returns an idle Local for p. A p without a positive Limit and
// Period yields a Local that refuses everything.
func NewLocal(p Policy) *Local {
	l := &Local{name: p.Name, capacity: p.Capacity()}
	if p.Limit > 0 && p.Period > 0 && l.capacity > 0 {
		l.t = (int64(p.Period) + p.Limit - 1) / p.Limit
		l.tau = l.capacity * l.t
	}
	return l
}

// AllowN takes n units (0 means 1) at now when the policy admits them, and
// reports the result in the same terms as an Admitter's.
func (l *Local) AllowN(now time.Time, n int64) Result {
	if n <= 0 {
		n = 1
	}
	r := Result{Policy: l.name, Limit: l.capacity}
	if l.t == 0 {
		r.RetryAfter = Never
		return r
	}
	ns := now.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	base := max(l.tat, ns)
	next := base + n*l.t
	switch {
	case next-ns <= l.tau:
		l.tat, base = next, next
		r.Allowed = true
	case n > l.capacity:
		r.RetryAfter = Never
	default:
		r.RetryAfter = time.Duration(next - l.tau - ns)
	}
	r.Remaining = max(0, (l.tau-(base-ns))/l.t)
	r.ResetAfter = time.Duration(base - ns)
	return r
}
