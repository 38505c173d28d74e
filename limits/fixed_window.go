package limits

import "context"

// FixedWindow counts units in windows aligned to the unix epoch: window
// w = ⌊now / Period⌋ covers [w·Period, (w+1)·Period) and admits a request
// of n units when
//
//	count(w) + n ≤ Limit
//
// The count is a String key (keys.Admission suffixed with ":<w>", same hash
// tag) incremented with INCRBY; the same script sets its PX TTL to Period
// when the INCRBY creates it, so no counter lives without one (and none
// outlives the next window). RetryAfter on refusal and ResetAfter are the
// time to the window's end.
//
// Known weakness: the count restarts at every boundary, so up to 2 × Limit
// units pass around a boundary (Limit just before it, Limit just after).
// Burst is ignored.
//
// It is safe for concurrent use.
type FixedWindow struct{ s single }

// NewFixedWindow returns the FixedWindow limiter of policy p (its Algorithm is set to
// AlgFixedWindow) on a. p should pass Validate; AllowN reports an invalid one.
func NewFixedWindow(a *Admitter, p Policy) *FixedWindow {
	return &FixedWindow{s: newSingle(a, p, AlgFixedWindow)}
}

// AllowN asks whether n units (0 means 1) of tenant may pass now, by Redis
// TIME, and takes them when they may. A refusal changes no state.
func (l *FixedWindow) AllowN(ctx context.Context, tenant string, n int64) (Result, error) {
	return l.s.AllowN(ctx, tenant, n)
}

// Policy returns the enforced policy.
func (l *FixedWindow) Policy() Policy { return l.s.p }
