package limits

// AlgFixedWindow counts units in windows aligned to the unix epoch: window
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
const AlgFixedWindow Algorithm = "fixed_window"
