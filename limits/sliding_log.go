package limits

// AlgSlidingLog keeps the instant of every admitted unit in a sorted set
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
const AlgSlidingLog Algorithm = "sliding_log"
