package limits

// AlgTokenBucket is a bucket of Burst tokens (default Limit) refilled lazily at
// Limit per Period: a Hash {tokens, ts} at keys.Admission, a missing key
// being a full bucket. A request of n units at now
//
//	tokens = min(Burst, tokens + (now − ts) × Limit / Period)
//	passes when tokens ≥ n, and then tokens −= n, ts = now
//
// with a PX TTL equal to the time the bucket takes to refill fully. Tokens
// are stored as integers in 1/Period-µs fractions of a token, so refill is
// exact. RetryAfter on refusal is (n − tokens) × Period / Limit, or Never when
// n > Burst.
const AlgTokenBucket Algorithm = "token_bucket"
