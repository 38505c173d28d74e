package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue"
)

// batchAnswer is the 202 body of POST /v1/jobs:batch: one answer per job, in
// request order (a job whose id was seen before has its first answer).
type batchAnswer struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// handleJob serves POST /v1/jobs.
func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	s.submit(w, r, false)
}

// handleBatch serves POST /v1/jobs:batch.
func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	s.submit(w, r, true)
}

// submit runs a submission through its steps, each of which may answer:
//
//	auth → content type → body headers → decode and validate → cost and
//	capacity check (chargeOf) → idempotency reservation → admission →
//	schedule and enqueue (makeDurable) → stored answers → 202
//
// Everything up to the cost check needs no Redis, so a request it refuses
// writes nothing (the limit-state headers of the answer are read by a dry
// run that writes nothing either). Every refusal after the reservation
// releases it, so the client can retry with the same ids, except a 503
// whose enqueue outcome is unknown, which keeps them as unknown
// (unknown.go). The body has
// ingest.body_timeout to arrive, and the answer ingest.write_timeout after
// it (body.go).
func (s *Server) submit(w http.ResponseWriter, r *http.Request, batch bool) {
	snap := s.snap.Load()
	armBody(w, snap, 0)
	ts, p := authenticate(r, snap)
	if p != nil {
		writeProblem(w, p)
		return
	}
	q := &request{w: w, r: r, snap: snap, ts: ts, batch: batch}
	if ts.tenantPolicy != nil {
		q.policies = ts.tenantOnly
		setPolicyHeader(w.Header(), ts, ts.tenantOnly)
	}
	jobs, all, ok := s.read(q)
	if !ok {
		return
	}
	sub, p := s.reserveIDs(r.Context(), snap, ts, jobs)
	if p != nil {
		s.fail(q, p)
		return
	}
	if len(sub.fresh) == 0 {
		s.metrics.replays.WithLabelValues(ts.name).Inc()
		w.Header().Set("Idempotent-Replayed", "true")
		s.stateHeaders(r.Context(), w, snap, ts, q.policies)
		s.answer(w, batch, sub.answers)
		return
	}
	s.admitAndEnqueue(q, jobs, all, sub)
}

// request is one submission on its way through submit's steps.
type request struct {
	w     http.ResponseWriter
	r     *http.Request
	snap  *snapshot
	ts    *tenantState
	batch bool
	// policies are the request's policies as far as they are known: the
	// tenant's until the jobs are decoded, then every policy they use.
	policies []limits.Policy
}

// fail answers q with p, and with the limit state of q's policies unless
// the client's connection failed (p.err: it is gone) or Redis is what failed.
func (s *Server) fail(q *request, p *problem) {
	s.logBodyError(q.r, q.ts.name, p)
	p.Tenant = q.ts.name
	if p.Backend != "redis" && p.err == nil {
		s.stateHeaders(q.r.Context(), q.w, q.snap, q.ts, q.policies)
	}
	writeProblem(q.w, p)
}

// read runs the steps that need no Redis (content type, body headers,
// decode and validate, cost check) and returns the jobs and their charge;
// ok is false when it answered.
func (s *Server) read(q *request) (jobs []job, all charge, ok bool) {
	if p := checkContentType(q.r); p != nil {
		s.fail(q, p)
		return nil, charge{}, false
	}
	if p := checkBodyHeaders(q.w, q.r, q.snap.maxBody); p != nil {
		s.fail(q, p)
		return nil, charge{}, false
	}
	decode := decodeSingle
	if q.batch {
		decode = decodeBatch
	}
	jobs, p := decode(q.w, q.r, q.snap, s.clock.Now())
	armWrite(q.w, q.snap, 0)
	if p != nil {
		s.fail(q, p)
		return nil, charge{}, false
	}
	all, p = chargeOf(q.ts, jobs)
	q.policies = all.policies
	setPolicyHeader(q.w.Header(), q.ts, all.policies)
	if p != nil {
		s.fail(q, p)
		return nil, charge{}, false
	}
	return jobs, all, true
}

// admitAndEnqueue runs the fresh jobs of sub (those not replayed) through
// admission (not the retried ones, admitted the first time) and enqueue, in
// one script call where it can (submitInOne, submit.go), else in two steps,
// giving sub's reservations back when either refuses, or keeping them as
// unknown when the enqueue's outcome is unknown; then stores and writes the
// answers. A retried job is enqueued with its first enqueued_at, so it is
// the same job.
func (s *Server) admitAndEnqueue(q *request, jobs []job, all charge, sub *submission) {
	ctx, ts := q.r.Context(), q.ts
	fresh, admit := jobs, jobs // every job fresh (sub.fresh is then 0..n-1) and none retried: no copies
	var again map[int]time.Time
	if len(sub.fresh) != len(jobs) || len(sub.retried) > 0 {
		fresh, admit = make([]job, len(sub.fresh)), nil
		again = make(map[int]time.Time, len(sub.retried))
		for _, r := range sub.retried {
			again[r.idx] = r.rec.EnqueuedAt
		}
		for i, k := range sub.fresh {
			fresh[i] = jobs[k]
			if _, ok := again[k]; !ok {
				admit = append(admit, jobs[k])
			}
		}
	}
	if s.submitInOne(q, jobs, all, sub, fresh) {
		return
	}
	if p := s.scheduledRoom(ctx, q.snap, ts.name, fresh); p != nil {
		s.giveBack(ctx, q.snap, ts, sub)
		s.fail(q, p)
		return
	}
	if p := s.admitFresh(q, jobs, all, admit); p != nil {
		s.giveBack(ctx, q.snap, ts, sub)
		s.fail(q, p)
		return
	}
	envs := envelopes(ts.name, fresh, s.clock.Now().UTC())
	for i, k := range sub.fresh {
		if at, ok := again[k]; ok {
			envs[i].EnqueuedAt = at
		}
	}
	if p := s.makeDurable(ctx, q.snap, ts.name, envs); p != nil {
		if p.unknown {
			s.keepUnknown(ctx, q.snap, ts, jobs, sub, envs)
		} else {
			s.giveBack(ctx, q.snap, ts, sub)
		}
		s.fail(q, unknownDetail(p, q.snap, jobs, sub))
		return
	}
	s.accept(q, sub, envs)
}

// accept answers a request whose fresh jobs (sub.fresh, envs in the same
// order) are durable: it builds their answers, stores them for their ids and
// writes the 202.
func (s *Server) accept(q *request, sub *submission, envs []queue.Envelope) {
	ts := q.ts
	for i, k := range sub.fresh {
		b, err := jobAnswer{JobID: envs[i].ID, Tenant: ts.name, EnqueuedAt: envs[i].EnqueuedAt, DueAt: envs[i].NotBefore}.marshal()
		if err != nil {
			s.fail(q, newProblem(http.StatusInternalServerError, "", "encode answer"))
			return
		}
		sub.answers[k] = b
	}
	s.storeAnswers(q.r.Context(), q.snap, ts, sub)
	s.answer(q.w, q.batch, sub.answers)
}

// admitFresh runs admission for the jobs admit (a part of jobs, whose
// charge all passed: admit's own cannot fail, and when it is all of jobs it
// is all's). With none to admit (every job retries an unknown id) it only
// sets the limit-state headers.
func (s *Server) admitFresh(q *request, jobs []job, all charge, admit []job) *problem {
	if len(admit) == 0 {
		s.stateHeaders(q.r.Context(), q.w, q.snap, q.ts, q.policies)
		return nil
	}
	c := all
	if len(admit) < len(jobs) {
		c, _ = chargeOf(q.ts, admit)
	}
	return s.admitAndHeaders(q.r.Context(), q.w, q.snap, q.ts, &c)
}

// admitAndHeaders runs admission, sets the limit-state headers, counts the
// decision, and returns the problem to answer when the request is refused.
func (s *Server) admitAndHeaders(ctx context.Context, w http.ResponseWriter, snap *snapshot, ts *tenantState, c *charge) *problem {
	return s.judge(w, snap, ts, c, s.admit(ctx, snap, ts, c))
}

// judge sets the limit-state headers of v, the admission of c, counts the
// decision, and returns the problem to answer when it is not an admission.
func (s *Server) judge(w http.ResponseWriter, snap *snapshot, ts *tenantState, c *charge, v verdict) *problem {
	if errors.Is(v.err, limits.ErrInvalidRequest) {
		s.metrics.decision(ts, "", resultInvalid)
		s.log.Error("admission request refused by the limiter", "tenant", ts.name, "err", v.err)
		return newProblem(http.StatusInternalServerError, "",
			"the rate limiter refused this request's arguments (a policy it cannot run, or a bug); retrying will not help")
	}
	if v.err != nil && !v.failOpen {
		s.metrics.decision(ts, "", resultError)
		s.warnRepeat(ts.name, "admission failed, tenant fails closed", "err", v.err)
		p := newProblem(http.StatusServiceUnavailable, "",
			"the rate limiter (redis) is unreachable and this tenant fails closed; retry later")
		p.Backend = "redis"
		p.RetryAfter = retryAfterSeconds(snap.retryAfter)
		return p
	}
	d := v.decision
	var refused *problem
	if !d.Allowed {
		refused = refusal(snap, ts, d)
	}
	results := d.Results
	if d.Violated == limits.ViolatedBacklog {
		results = withBacklog(w.Header(), results, ts.maxBacklog, d.Backlog, refused.RetryAfter)
	}
	setStateHeaders(w.Header(), results, d.Violated)
	algorithm := ""
	if !d.Allowed {
		if pol, ok := ts.policy(d.Violated); ok {
			algorithm = string(pol.Algorithm)
		}
	}
	s.admissions.add(ts.name, c.jobs, d.Allowed)
	switch {
	case v.failOpen:
		s.metrics.decision(ts, algorithm, resultFailOpen)
	case d.Allowed:
		s.metrics.decision(ts, algorithm, resultAllowed)
	case d.Violated == limits.ViolatedBacklog:
		s.metrics.decision(ts, algorithm, resultBacklog)
	default:
		s.metrics.decision(ts, algorithm, resultDenied)
	}
	return refused
}

// stateHeaders sets RateLimit and X-RateLimit-* on an answer that ran no
// admission (a bad request, a replay, a 409), so every answer after
// authentication carries the limit state: one dry-run EVALSHA of the
// request's policies that reads and writes nothing else, bounded by the Redis
// timeout. When Redis cannot answer, the state is unknown and the headers
// are left out. An answer that already has them (admission ran) is left as it
// is.
func (s *Server) stateHeaders(ctx context.Context, w http.ResponseWriter, snap *snapshot, ts *tenantState, policies []limits.Policy) {
	if len(policies) == 0 || w.Header().Get(hRateLimit) != "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, snap.redisTimeout)
	defer cancel()
	d, err := s.admitter.Admit(ctx, limits.Request{Tenant: ts.name, Policies: policies, DryRun: true, Now: s.scriptNow()})
	if err != nil {
		return
	}
	setStateHeaders(w.Header(), d.Results, "")
}

// answer writes the 202: the job's answer, or the batch's answers.
func (s *Server) answer(w http.ResponseWriter, batch bool, answers []json.RawMessage) {
	if !batch {
		writeRawJSON(w, http.StatusAccepted, answers[0])
		return
	}
	writeJSON(w, http.StatusAccepted, batchAnswer{Jobs: answers})
}
