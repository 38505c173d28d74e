package limits

import "context"

// Limiter is one policy of one algorithm, applied per tenant. FixedWindow,
// SlidingWindow, GCRA, TokenBucket and SlidingLog implement it on an
// Admitter; each is safe for concurrent use.
type Limiter interface {
	// AllowN asks whether n units of tenant may pass now (Redis TIME), and
	// takes them when they may. A refusal changes no state.
	AllowN(ctx context.Context, tenant string, n int64) (Result, error)
}

// single is the shared body of the per-algorithm types: one policy checked
// alone by an Admitter.
type single struct {
	a *Admitter
	p Policy
}

func newSingle(a *Admitter, p Policy, alg Algorithm) single {
	p.Algorithm = alg
	return single{a: a, p: p}
}

// AllowN decides n units of tenant against the one policy.
func (s single) AllowN(ctx context.Context, tenant string, n int64) (Result, error) {
	d, err := s.a.Admit(ctx, Request{Tenant: tenant, Policies: []Policy{s.p}, Cost: n})
	if err != nil {
		return Result{}, err
	}
	return d.Results[0], nil
}
