package limits

import "context"

// TokenBucket is a bucket of Burst tokens (default Limit) refilled lazily at
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
//
// It is safe for concurrent use.
type TokenBucket struct{ s single }

// NewTokenBucket returns the TokenBucket limiter of policy p (its Algorithm is set to
// AlgTokenBucket) on a. p should pass Validate; AllowN reports an invalid one.
func NewTokenBucket(a *Admitter, p Policy) *TokenBucket {
	return &TokenBucket{s: newSingle(a, p, AlgTokenBucket)}
}

// AllowN asks whether n units (0 means 1) of tenant may pass now, by Redis
// TIME, and takes them when they may. A refusal changes no state.
func (l *TokenBucket) AllowN(ctx context.Context, tenant string, n int64) (Result, error) {
	return l.s.AllowN(ctx, tenant, n)
}

// Policy returns the enforced policy.
func (l *TokenBucket) Policy() Policy { return l.s.p }
