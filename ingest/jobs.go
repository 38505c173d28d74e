package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/sluicehq/sluice/limits"
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
//	enqueue → stored answers → 202
//
// Everything up to the cost check needs no Redis, so a request it refuses
// writes nothing (the limit-state headers of the answer are read by a dry
// run that writes nothing either). Every refusal after the reservation
// releases it, so the client can retry with the same ids. The body has
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
	// policies are the request's policies as far as they are known: the
	// tenant's until the jobs are decoded, then every policy they use.
	var policies []limits.Policy
	fail := func(p *problem) {
		s.logBodyError(r, ts.name, p)
		p.Tenant = ts.name
		// No limit state for a client whose connection failed (p.err: it is
		// gone), nor when Redis is what failed.
		if p.Backend != "redis" && p.err == nil {
			s.stateHeaders(r.Context(), w, snap, ts, policies)
		}
		writeProblem(w, p)
	}
	if ts.tenantPolicy != nil {
		policies = []limits.Policy{*ts.tenantPolicy}
		setPolicyHeader(w.Header(), ts, []string{ts.tenantPolicy.Name})
	}
	if p := checkContentType(r); p != nil {
		fail(p)
		return
	}
	if p := checkBodyHeaders(w, r, snap.maxBody); p != nil {
		fail(p)
		return
	}
	now := s.clock.Now()
	decode := decodeSingle
	if batch {
		decode = decodeBatch
	}
	jobs, p := decode(w, r, snap, now)
	armWrite(w, snap, 0)
	if p != nil {
		fail(p)
		return
	}
	all, p := chargeOf(ts, jobs)
	policies = all.policies
	setPolicyHeader(w.Header(), ts, all.names())
	if p != nil {
		fail(p)
		return
	}

	sub, p := s.reserveIDs(r.Context(), snap, ts, jobs)
	if p != nil {
		fail(p)
		return
	}
	if len(sub.fresh) == 0 {
		s.metrics.replays.WithLabelValues(ts.name).Inc()
		w.Header().Set("Idempotent-Replayed", "true")
		s.stateHeaders(r.Context(), w, snap, ts, policies)
		s.answer(w, batch, sub.answers)
		return
	}
	fresh := make([]job, len(sub.fresh))
	for i, k := range sub.fresh {
		fresh[i] = jobs[k]
	}
	// fresh is a part of jobs, whose charge passed: its own cannot fail,
	// and when nothing was replayed it is all's.
	c := all
	if len(fresh) < len(jobs) {
		c, _ = chargeOf(ts, fresh)
	}
	if p := s.admitAndHeaders(r.Context(), w, snap, ts, &c); p != nil {
		s.releaseIDs(r.Context(), snap, ts, sub.reserved)
		fail(p)
		return
	}

	envs := envelopes(ts.name, fresh, s.clock.Now().UTC())
	if err := s.enqueue(r.Context(), snap, envs); err != nil {
		s.releaseIDs(r.Context(), snap, ts, sub.reserved)
		s.log.Warn("enqueue failed", "tenant", ts.name, "jobs", len(envs), "err", err)
		fail(enqueueProblem(snap, ts.name, err))
		return
	}
	for i, k := range sub.fresh {
		b, err := json.Marshal(jobAnswer{JobID: envs[i].ID, Tenant: ts.name, EnqueuedAt: envs[i].EnqueuedAt})
		if err != nil {
			fail(newProblem(http.StatusInternalServerError, "", "encode answer"))
			return
		}
		sub.answers[k] = b
	}
	s.storeAnswers(r.Context(), snap, ts, sub)
	s.answer(w, batch, sub.answers)
}

// admitAndHeaders runs admission, sets the limit-state headers, counts the
// decision, and returns the problem to answer when the request is refused.
func (s *Server) admitAndHeaders(ctx context.Context, w http.ResponseWriter, snap *snapshot, ts *tenantState, c *charge) *problem {
	v := s.admit(ctx, snap, ts, c)
	if errors.Is(v.err, limits.ErrInvalidRequest) {
		s.metrics.decision(ts, "", resultInvalid)
		s.log.Error("admission request refused by the limiter", "tenant", ts.name, "err", v.err)
		return newProblem(http.StatusInternalServerError, "",
			"the rate limiter refused this request's arguments (a policy it cannot run, or a bug); retrying will not help")
	}
	if v.err != nil && !v.failOpen {
		s.metrics.decision(ts, "", resultError)
		s.log.Warn("admission failed, tenant fails closed", "tenant", ts.name, "err", v.err)
		p := newProblem(http.StatusServiceUnavailable, "",
			"the rate limiter (redis) is unreachable and this tenant fails closed; retry later")
		p.Backend = "redis"
		p.RetryAfter = retryAfterSeconds(snap.retryAfter)
		return p
	}
	d := v.decision
	setStateHeaders(w.Header(), d.Results, d.Violated)
	algorithm := ""
	if !d.Allowed {
		if pol, ok := ts.policy(d.Violated); ok {
			algorithm = string(pol.Algorithm)
		}
	}
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
	if d.Allowed {
		return nil
	}
	return refusal(snap, ts, d)
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
