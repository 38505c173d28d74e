// Package limits decides whether a tenant's job may be admitted, against up
// to several rate-limit policies and the tenant's backlog gate at once, in
// one atomic Redis script (lua.Admit) per decision.
//
// Five algorithms are offered, one file each, whose Algorithm constant
// states its formula: AlgFixedWindow, AlgSlidingWindow, AlgGCRA,
// AlgTokenBucket and AlgSlidingLog (Algorithms lists them). An Admitter
// decides a Request of one policy or of several (a tenant policy plus a
// job-type policy plus the backlog gate) all or nothing: when anything
// refuses, no state is advanced. Local is an in-process limiter for when
// Redis cannot be reached.
//
// Time is integer microseconds. Redis TIME is the clock unless a Request
// carries Now (tests, replays). Every key carries the tenant's hash tag
// (package keys) and every write sets a PX TTL, so no key outlives its use.
package limits

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/keys"
)

// Algorithm names a rate-limit algorithm; its value is the name used in
// configuration, in keys and in the admission script.
type Algorithm string

// Algorithms lists every algorithm (each defined, with its formula, in its
// own file: fixed_window.go, sliding_window.go, gcra.go, token_bucket.go,
// sliding_log.go), in a stable order. It is the one list:
// configuration, the admin API and error messages take it from here.
var Algorithms = []Algorithm{AlgFixedWindow, AlgSlidingWindow, AlgGCRA, AlgTokenBucket, AlgSlidingLog}

// AlgorithmNames is Algorithms as "fixed_window, sliding_window, …", for
// messages.
func AlgorithmNames() string {
	names := make([]string, len(Algorithms))
	for i, a := range Algorithms {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// known reports whether a is one of Algorithms.
func (a Algorithm) known() bool {
	for _, k := range Algorithms {
		if k == a {
			return true
		}
	}
	return false
}

// Never is the RetryAfter of a refusal that no amount of waiting cures: the
// request's cost exceeds what the policy can ever admit at once (more than
// Limit, or more than Burst for gcra and token_bucket).
const Never time.Duration = -1

// MaxLogLimit caps Limit for sliding_log, which keeps one sorted-set member
// per admitted unit: one call adds up to Limit members and removes up to
// Limit expired ones. At 100,000 that call took 266 ms here, past
// redis.timeout, and stalled every tenant on the shared Redis (a hostile
// probe's cost-100000 job answered 429 after its submit had run); at 10,000
// it takes about 30 ms. Above it, sliding_window counts in O(1).
const MaxLogLimit = 10_000

// MaxPeriod caps Period: 366 days, a year's quota. It keeps every instant the
// scripts compute (now plus two periods, for sliding_window's reset) far
// below 2^53 µs, where Lua's doubles stop being exact, and every reset and
// retry they return inside a time.Duration.
const MaxPeriod = 366 * 24 * time.Hour

// MaxExact is 2^53: a product the scripts compute in Lua's doubles (burst ×
// period in µs for gcra and token_bucket, limit × period in µs for
// sliding_window) must stay below it to be exact.
const MaxExact = 1 << 53

// Policy is one rate limit: Limit units per Period, by Algorithm. Policies
// are comparable, so a caller can tell whether a reloaded policy changed.
type Policy struct {
	// Name tells the policy apart within a tenant ("tenant", "type.encode");
	// it is part of the state key and is reported in Decision.Violated.
	Name string
	// Algorithm decides how Limit and Period are enforced.
	Algorithm Algorithm
	// Limit is the number of units admitted per Period (>= 1).
	Limit int64
	// Period is the window (fixed_window, sliding_window, sliding_log) or the
	// time in which Limit units drip back (gcra, token_bucket). At least 1ms
	// and at least 1µs per unit (Period >= Limit µs).
	Period time.Duration
	// Burst is, for gcra and token_bucket, how many units may pass at once
	// from an empty state (the bucket size; GCRA's tolerance is τ = Burst × T).
	// 0 means Limit. The window algorithms and sliding_log ignore it.
	Burst int64
}

// burst is Burst with its default applied.
func (p Policy) burst() int64 {
	if p.Burst == 0 {
		return p.Limit
	}
	return p.Burst
}

// Capacity is the most units p admits in one request from an empty state:
// Burst (default Limit) for gcra and token_bucket, Limit otherwise. Result
// reports it as Limit.
func (p Policy) Capacity() int64 {
	switch p.Algorithm {
	case AlgGCRA, AlgTokenBucket:
		return p.burst()
	}
	return p.Limit
}

// PolicyError is a policy field outside its bounds, as Validate reports it.
type PolicyError struct {
	// Policy is the policy's Name.
	Policy string
	// Field is the offending field as configured: "name", "algorithm",
	// "limit", "period" or "burst".
	Field string
	// Msg states the bound and the value, e.g. "must be <= 1000000, one unit
	// per µs of period 1s (got 2000000)".
	Msg string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("limits: policy %s: %s: %s", e.Policy, e.Field, e.Msg)
}

// Validate reports the first field of p outside the bounds the admission
// script (lua/admit.lua and its modules) needs to compute exactly, as a
// *PolicyError naming the field and the bound:
//
//   - Name: keys.ValidID;
//   - Algorithm: one of Algorithms;
//   - Limit >= 1, and at most one unit per µs of Period (Limit <= Period in
//     µs; gcra's emission interval is then >= 1 µs);
//   - 1ms <= Period <= MaxPeriod;
//   - Burst >= 0 (0 means Limit);
//   - gcra and token_bucket: Burst (default Limit) × Period in µs < MaxExact
//     (GCRA's tolerance, the token bucket's scaled size);
//   - sliding_window: Limit × Period in µs < MaxExact (its weighted count);
//   - sliding_log: Limit <= MaxLogLimit (one sorted-set member per unit).
//
// Every policy Validate accepts is admitted by the script without an error
// and with results inside int64 and time.Duration; the table test
// TestPolicyBoundsAgainstScript walks each bound from both sides.
func (p Policy) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &PolicyError{Policy: p.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if !keys.ValidID(p.Name) {
		return bad("name", "must be %s (got %q)", keys.IDRule, p.Name)
	}
	if !p.Algorithm.known() {
		return bad("algorithm", "unknown algorithm %q (want one of %s)", p.Algorithm, AlgorithmNames())
	}
	us := p.Period.Microseconds()
	switch {
	case p.Limit < 1:
		return bad("limit", "must be >= 1 (got %d)", p.Limit)
	case p.Period < time.Millisecond:
		return bad("period", "must be >= 1ms (got %v)", p.Period)
	case p.Period > MaxPeriod:
		return bad("period", "must be <= %v (366 days) (got %v)", MaxPeriod, p.Period)
	case p.Limit > us:
		return bad("limit", "must be <= %d, one unit per µs of period %v (got %d)", us, p.Period, p.Limit)
	case p.Burst < 0:
		return bad("burst", "must be >= 0 (got %d)", p.Burst)
	}
	maxProduct := (MaxExact - 1) / us // the largest factor f with f × us < 2^53
	switch p.Algorithm {
	case AlgGCRA, AlgTokenBucket:
		if b := p.burst(); b > maxProduct {
			field := "burst"
			if p.Burst == 0 {
				field = "limit" // the burst defaults to it
			}
			return bad(field, "must be <= %d: burst × period (%d µs) must stay below 2^53 (got %d)", maxProduct, us, b)
		}
	case AlgSlidingWindow:
		if p.Limit > maxProduct {
			return bad("limit", "must be <= %d: limit × period (%d µs) must stay below 2^53 for sliding_window (got %d)", maxProduct, us, p.Limit)
		}
	case AlgSlidingLog:
		if p.Limit > MaxLogLimit {
			return bad("limit", "must be <= %d for sliding_log, which keeps one entry per unit (got %d)", MaxLogLimit, p.Limit)
		}
	}
	return nil
}

// Result is one policy's part of a decision: what ingest turns into the
// RateLimit, RateLimit-Policy, X-RateLimit-* and Retry-After headers.
type Result struct {
	// Policy is the policy's Name.
	Policy string
	// Allowed says whether this policy alone admits the request. The request
	// is admitted only when every policy and the backlog gate admit it
	// (Decision.Allowed).
	Allowed bool
	// Limit is the most units the policy admits at once from an empty state:
	// its Limit, or Burst for gcra and token_bucket (Policy.Capacity).
	Limit int64
	// Remaining is the units that could still be admitted now, in [0, Limit]:
	// after this request's cost when the decision admitted it, of the
	// unchanged state when it was refused.
	Remaining int64
	// RetryAfter is 0 when Allowed; otherwise how long until this policy
	// could admit the same cost (assuming nothing else is admitted meanwhile),
	// or Never when the cost exceeds Limit.
	RetryAfter time.Duration
	// ResetAfter is how long until the policy's state is back to empty
	// (Remaining == Limit) if nothing more is admitted.
	ResetAfter time.Duration
}
