package limits

// AlgSlidingWindow approximates a window that slides with now from the counts
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
const AlgSlidingWindow Algorithm = "sliding_window"
