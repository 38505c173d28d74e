package ingest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/sluicehq/sluice/limits"
)

// Admitter decides whether a tenant may submit; *limits.Admitter is the
// production one (one EVALSHA per decision, all policies and the backlog gate
// at once, all or nothing).
type Admitter interface {
	Admit(ctx context.Context, req limits.Request) (limits.Decision, error)
}

// charge is what one request asks of its tenant's policies.
type charge struct {
	// policies are the request's policies in header order: "tenant" first,
	// then "type.<type>" for each configured type present, by type name.
	policies []limits.Policy
	// costs are what each of policies is charged, in the same order: the
	// tenant policy the whole request, a type's policy only its own jobs.
	costs []int64
	// total is the sum of every job's cost: a batch is one request of cost
	// N, counted whole by the tenant policy and the backlog gate.
	total int64
}

// names returns the charged policies' names.
func (c *charge) names() []string {
	out := make([]string, len(c.policies))
	for i, p := range c.policies {
		out[i] = p.Name
	}
	return out
}

// chargeOf works out which of ts's policies jobs use and their total cost.
func chargeOf(ts *tenantState, jobs []job) charge {
	var c charge
	var types []string
	typeCost := map[string]int64{}
	for _, j := range jobs {
		c.total += j.cost
		if _, ok := ts.typePolicies[j.typ]; ok {
			if _, seen := typeCost[j.typ]; !seen {
				types = append(types, j.typ)
			}
			typeCost[j.typ] += j.cost
		}
	}
	if ts.tenantPolicy != nil {
		c.policies = append(c.policies, *ts.tenantPolicy)
		c.costs = append(c.costs, c.total)
	}
	sort.Strings(types)
	for _, t := range types {
		c.policies = append(c.policies, ts.typePolicies[t])
		c.costs = append(c.costs, typeCost[t])
	}
	return c
}

// overCapacity returns a 422 when some policy could never admit the request
// whatever the wait (its cost above the policy's Capacity: Burst for gcra
// and token_bucket, Limit otherwise), so the client is not told to retry
// forever.
func overCapacity(c *charge, batch bool) *problem {
	for i, p := range c.policies {
		if c.costs[i] > p.Capacity() {
			field := "cost"
			if batch {
				field = "jobs"
			}
			return newProblem(http.StatusUnprocessableEntity, field, fmt.Sprintf(
				"the request's cost %d for policy %q exceeds its capacity %d, so it can never be admitted",
				c.costs[i], p.Name, p.Capacity()))
		}
	}
	return nil
}

// verdict is the outcome of admission.
type verdict struct {
	decision limits.Decision
	// failOpen says the decision was made by the in-process limiters because
	// Redis could not be reached and the tenant fails open.
	failOpen bool
	// err is the limiter's error when Redis could not be reached.
	err error
}

// admit runs the request's admission: one Admitter call bounded by the Redis
// timeout, so a dead Redis answers within it. On an error, a tenant with
// on_limiter_error "allow" is decided by its in-process limiters (failOpen);
// a "deny" tenant gets the error back (the caller answers 503).
func (s *Server) admit(ctx context.Context, snap *snapshot, ts *tenantState, c *charge) verdict {
	if len(c.policies) == 0 && ts.maxBacklog <= 0 {
		return verdict{decision: limits.Decision{Allowed: true}}
	}
	req := limits.Request{
		Tenant:     ts.name,
		Policies:   c.policies,
		Costs:      c.costs,
		Cost:       c.total,
		MaxBacklog: ts.maxBacklog,
		Now:        s.limiterNow(),
	}
	ctx, cancel := context.WithTimeout(ctx, snap.redisTimeout)
	start := time.Now()
	d, err := s.admitter.Admit(ctx, req)
	cancel()
	s.metrics.admissionDuration.Observe(time.Since(start).Seconds())
	if err == nil {
		return verdict{decision: d}
	}
	if !ts.allowOnError {
		return verdict{err: err}
	}
	return verdict{decision: localDecision(ts, c, s.now()), failOpen: true, err: err}
}

// localDecision decides with the tenant's in-process limiters, one per
// policy, used while Redis is unreachable. Each ingest instance allows up to
// the full limit on its own, so N instances admit at most N times the limit:
// a rough bound, not the limit. Policies are asked in order and the first
// refusal stops; a policy asked before it keeps the cost it took (the bound
// only gets tighter). The backlog gate is not checked (its counter is in
// Redis).
func localDecision(ts *tenantState, c *charge, now time.Time) limits.Decision {
	d := limits.Decision{Allowed: true, Results: make([]limits.Result, 0, len(c.policies))}
	for i, p := range c.policies {
		r := ts.local[p.Name].AllowN(now, c.costs[i])
		r.Policy = p.Name
		d.Results = append(d.Results, r)
		if !r.Allowed {
			d.Allowed = false
			d.Violated = p.Name
			break
		}
	}
	return d
}

// refusal returns the 429 problem of a refused decision and its Retry-After
// in seconds.
//
// A policy refusal waits the violated policy's RetryAfter, rounded up to
// whole seconds, at least 1. A backlog refusal waits backlog ÷ outflow rate
// seconds, rounded up, at least 1: the time the drainers need to send what is
// queued, after which the tenant is well under max_backlog. A tenant without
// an outflow rate (unlimited outflow) waits the configured retry_after.
func refusal(snap *snapshot, ts *tenantState, d limits.Decision) *problem {
	p := &problem{
		Type:             quotaExceeded,
		Title:            "Quota exceeded",
		Status:           http.StatusTooManyRequests,
		Tenant:           ts.name,
		ViolatedPolicies: []string{d.Violated},
	}
	if d.Violated == limits.ViolatedBacklog {
		p.RetryAfter = retryAfterSeconds(snap.retryAfter)
		rate := "an unlimited rate"
		if o := ts.outflow; o.Shaped() {
			p.RetryAfter = max(1, int64(math.Ceil(float64(d.Backlog)/o.Rate)))
			rate = fmt.Sprintf("%g per second", o.Rate)
		}
		p.Backlog = d.Backlog
		p.Detail = fmt.Sprintf("tenant %s has %d units queued (max_backlog %d); at %s they leave in %d s",
			ts.name, d.Backlog, ts.maxBacklog, rate, p.RetryAfter)
		return p
	}
	var wait time.Duration
	for _, r := range d.Results {
		if r.Policy == d.Violated {
			wait = r.RetryAfter
		}
	}
	p.RetryAfter = retryAfterSeconds(wait)
	desc := d.Violated
	if pol, ok := ts.policy(d.Violated); ok {
		desc = fmt.Sprintf("%s (%s, %d per %s)", d.Violated, pol.Algorithm, pol.Limit, pol.Period)
	}
	p.Detail = fmt.Sprintf("tenant %s exceeded policy %s; retry after %d s", ts.name, desc, p.RetryAfter)
	return p
}

// limiterNow is the now given to the limiter: the Clock's time when one was
// set (tests), otherwise zero, so the scripts read Redis TIME and ingest
// instances with skewed clocks agree.
func (s *Server) limiterNow() time.Time {
	if s.clock == nil {
		return time.Time{}
	}
	return s.clock.Now()
}
