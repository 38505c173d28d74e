package limits

import "context"

// SlidingWindow approximates a window that slides with now from the counts
// of the current and the previous epoch-aligned window. At elapsed time e
// into the current window it admits n units when
//
//	estimate = ⌊prev × (Period − e) / Period⌋ + cur
//	estimate + n ≤ Limit
//
// Both counts (and the current window's index) live in one Hash at
// keys.Admission, with a PX TTL to the end of the next window, when the
// current count becomes the previous one for the last time. With previous
// 80 and current 20 at 25 % of a window of Limit 100 the estimate is 80 and a
// request passes; with current 85 at 75 % it is 105 and it is refused.
//
// Error: the estimate assumes the previous window's units arrived evenly.
// When they all came at its very end, up to (1 + f) × Limit units pass in
// the trailing Period at fraction f of the current window — always fewer
// than 2 × Limit (the fixed window's worst case), and exactly Limit when the
// previous window was empty. Burst is ignored.
//
// It is safe for concurrent use.
type SlidingWindow struct{ s single }

// NewSlidingWindow returns the SlidingWindow limiter of policy p (its Algorithm is set to
// AlgSlidingWindow) on a. p should pass Validate; AllowN reports an invalid one.
func NewSlidingWindow(a *Admitter, p Policy) *SlidingWindow {
	return &SlidingWindow{s: newSingle(a, p, AlgSlidingWindow)}
}

// AllowN asks whether n units (0 means 1) of tenant may pass now, by Redis
// TIME, and takes them when they may. A refusal changes no state.
func (l *SlidingWindow) AllowN(ctx context.Context, tenant string, n int64) (Result, error) {
	return l.s.AllowN(ctx, tenant, n)
}

// Policy returns the enforced policy.
func (l *SlidingWindow) Policy() Policy { return l.s.p }
