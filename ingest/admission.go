package ingest

import (
	"context"
	"errors"
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
	// N, counted whole by the tenant policy.
	total int64
	// queued is the part of total queued now or soon, the jobs without a
	// due time or due within dueSoon: the backlog gate counts only it,
	// since a scheduled job joins the backlog (keys.Backlog) only when it is
	// due and moved, while a delay of a millisecond is no way past the gate.
	queued int64
	// jobs is how many jobs the request holds (the admitted/s and
	// refused/s of the stats count jobs).
	jobs int
}

// chargeOf works out which of ts's policies jobs use and what each is
// charged, every sum checked (limits.AddCost), so nothing wrapped or beyond
// what the admission script can take ever reaches the Admitter. It refuses,
// with a 422 naming the cost of the job at fault ("cost", or "jobs[i].cost"
// in a batch), the first job that
//
//   - costs more than ts.maxJobCost for its type;
//   - brings the request's total above limits.MaxCost;
//   - brings the tenant policy's or its type's policy's charge above the
//     policy's Capacity (Burst for gcra and token_bucket, Limit otherwise):
//     the request could never be admitted whatever the wait, so the client
//     is not told to retry forever;
//   - brings the cost of the jobs queued now (those without a due time)
//     above the tenant's max_backlog: it could never pass the backlog gate.
//
// It needs no Redis, so a refusal comes before any Redis call. The policies
// of the charge are known even when it refuses.
func chargeOf(ts *tenantState, jobs []job) (charge, *problem) {
	var (
		c        charge
		types    []string
		typeCost = map[string]int64{}
		refused  *problem
	)
	for _, j := range jobs {
		_, typed := ts.typePolicies[j.typ]
		if typed {
			if _, seen := typeCost[j.typ]; !seen {
				types = append(types, j.typ)
				typeCost[j.typ] = 0
			}
		}
		if refused == nil {
			refused = c.add(ts, j, typed, typeCost)
		}
	}
	if ts.tenantPolicy != nil {
		c.policies = ts.tenantOnly // shared (read only): an append below copies
		c.costs = append(c.costs, c.total)
	}
	sort.Strings(types)
	for _, t := range types {
		c.policies = append(c.policies, ts.typePolicies[t])
		c.costs = append(c.costs, typeCost[t])
	}
	if refused != nil {
		c.total, c.queued, c.costs = 0, 0, nil
	}
	c.jobs = len(jobs)
	return c, refused
}

// add charges j to c.total and, when typed (j's type has a policy), to
// typeCost[j.typ], and returns the 422 of chargeOf when j breaks a bound.
func (c *charge) add(ts *tenantState, j job, typed bool, typeCost map[string]int64) *problem {
	// refuse names the field only when it refuses: the accepted path
	// allocates nothing per job.
	refuse := func(limit int64, format string, args ...any) *problem {
		f := fieldName(j.field, "cost")
		p := newProblem(http.StatusUnprocessableEntity, f, f+fmt.Sprintf(format, args...))
		p.Limit = limit
		return p
	}
	if b := ts.maxJobCost(j.typ); j.cost < 1 || j.cost > b.max {
		return refuse(b.max, " must be between 1 and %d, the most one job of type %q may cost: %s (got %d)", b.max, j.typ, b, j.cost)
	}
	total, ok := limits.AddCost(c.total, j.cost)
	if !ok {
		return refuse(limits.MaxCost, " brings the request's total cost above %d, the most one admission can take", limits.MaxCost)
	}
	c.total = total
	if p := ts.tenantPolicy; p != nil && total > p.Capacity() {
		return refuse(p.Capacity(), " brings the request's cost %d for policy %q above its capacity %d, so the request could never be admitted; send fewer units at once",
			total, p.Name, p.Capacity())
	}
	if typed {
		sub, ok := limits.AddCost(typeCost[j.typ], j.cost)
		p := ts.typePolicies[j.typ]
		if !ok || sub > p.Capacity() {
			return refuse(p.Capacity(), " brings the request's cost %d for policy %q above its capacity %d, so the request could never be admitted; send fewer units at once",
				sub, p.Name, p.Capacity())
		}
		typeCost[j.typ] = sub
	}
	if j.due == nil || time.Until(*j.due) <= dueSoon {
		c.queued += j.cost // at most total, checked above
	}
	if ts.maxBacklog > 0 && c.queued > ts.maxBacklog {
		return refuse(ts.maxBacklog, " brings the request's cost %d queued now above the tenant's max_backlog %d, so the request could never be admitted; send fewer units at once",
			c.queued, ts.maxBacklog)
	}
	return nil
}

// dueSoon is how far ahead a scheduled job's due time may be and still
// count in the backlog gate as queued now.
const dueSoon = time.Minute

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
// a "deny" tenant gets the error back (the caller answers 503). An error
// wrapping limits.ErrInvalidRequest is always given back (the caller answers
// 500), never decided in process.
func (s *Server) admit(ctx context.Context, snap *snapshot, ts *tenantState, c *charge) verdict {
	req := limits.Request{
		Tenant:     ts.name,
		Policies:   c.policies,
		Costs:      c.costs,
		Cost:       c.total,
		MaxBacklog: ts.maxBacklog,
		Now:        s.scriptNow(),
	}
	if c.queued < c.total {
		// Scheduled jobs: the gate counts only the jobs queued now, and
		// each policy keeps its own charge (c.costs has one per policy).
		if c.queued == 0 {
			req.MaxBacklog = 0 // no job queued now: no gate
		} else {
			req.Cost = c.queued
		}
	}
	if len(req.Policies) == 0 && req.MaxBacklog <= 0 {
		return verdict{decision: limits.Decision{Allowed: true}}
	}
	ctx, cancel := context.WithTimeout(ctx, snap.redisTimeout)
	start := time.Now()
	d, err := s.admitter.Admit(ctx, req)
	cancel()
	s.metrics.admissionDuration.Observe(time.Since(start).Seconds())
	if err == nil {
		return verdict{decision: d}
	}
	// A request the limiter refuses as invalid is not Redis being down:
	// deciding it in process would run the tenant without its shared limit.
	if !ts.allowOnError || errors.Is(err, limits.ErrInvalidRequest) {
		return verdict{err: err}
	}
	return verdict{decision: localDecision(ts, c, s.clock.Now()), failOpen: true, err: err}
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
// an outflow rate (unlimited outflow) waits the configured retry_after. A
// paused tenant gets the same wait, its detail saying the time counts from
// the resume.
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
			p.RetryAfter = backlogRetryAfter(d.Backlog, o.Rate)
			rate = fmt.Sprintf("%g per second", o.Rate)
		}
		p.Backlog = d.Backlog
		p.Detail = fmt.Sprintf("tenant %s has %d units queued (max_backlog %d); at %s they leave in %d s",
			ts.name, d.Backlog, ts.maxBacklog, rate, p.RetryAfter)
		if ts.outflow.Paused {
			p.Detail += " once the tenant's delivery is resumed (it is paused)"
		}
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

// maxRetryAfter caps every Retry-After ingest computes, in seconds (2^31 − 1,
// about 68 years): a bound against overflow, not a policy.
const maxRetryAfter = math.MaxInt32

// backlogRetryAfter is ⌈backlog ÷ rate⌉ seconds, at least 1 and at most
// maxRetryAfter, for any backlog and any rate > 0 (a huge backlog or a tiny
// rate never wraps the int64).
func backlogRetryAfter(backlog int64, rate float64) int64 {
	s := math.Ceil(float64(max(backlog, 0)) / rate)
	if !(s < maxRetryAfter) { // also NaN
		return maxRetryAfter
	}
	return max(1, int64(s))
}
