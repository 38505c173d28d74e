package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// One script call for admission and enqueue (Redis backend).
//
// When the queue is redisq on the very Redis client the Admitter and the
// server use, with no WAIT for replicas, a request's admission and its
// enqueue are one submit.lua call (limits.Admitter.Submit with the
// producer's redisq.Producer.SubmitPart): every policy, the backlog gate
// (exact: it reads the backlog in the script that raises it), RPUSH, the
// backlog counter and the job states, all or nothing, sharing round trips
// with concurrent requests in the Admitter's batches. Other requests take
// the two-step path (admitFresh, then makeDurable): scheduled jobs, retries
// of ids whose outcome was unknown (admitted the first time), another
// backend, and wrapped producers or admitters.
//
// Outcomes: an admission answers as admitFresh would (same headers,
// metrics and 429s); a submit Redis refused or never received (no
// connection, an error reply: nothing was written) is decided again by the
// two-step path, so fail-open and fail-closed tenants keep their answers;
// one that may have run (a timeout, a cut connection) is a 503 with an
// unknown outcome whose client ids are kept as unknown (unknown.go), as
// after an enqueue with an unknown outcome: the script is atomic, so either
// both the admission and the jobs exist or neither, and a retry with the
// same id enqueues at most once.

// submitter is the Admitter's one-call admission and enqueue
// (*limits.Admitter).
type submitter interface {
	Submit(ctx context.Context, r limits.Request, then limits.Then) (limits.Submitted, error)
	Redis() redis.UniversalClient
}

// oneCall returns the producer and admitter that can admit and enqueue
// fresh in one call, or ok false (see above).
func (s *Server) oneCall(fresh []job, sub *submission) (p *redisq.Producer, a submitter, ok bool) {
	if len(sub.retried) > 0 || len(fresh) == 0 {
		return nil, nil, false
	}
	for _, j := range fresh {
		if j.due != nil {
			return nil, nil, false
		}
	}
	p, ok = s.producer.(*redisq.Producer)
	if !ok || !p.Joins(s.rdb) {
		return nil, nil, false
	}
	a, ok = s.admitter.(submitter)
	if !ok || a.Redis() != s.rdb {
		return nil, nil, false
	}
	return p, a, true
}

// submitInOne admits and enqueues the fresh jobs of sub in one submit.lua
// call and answers, or returns false having written nothing and sent
// nothing that ran, for admitAndEnqueue's two-step path to decide.
func (s *Server) submitInOne(q *request, jobs []job, all charge, sub *submission, fresh []job) bool {
	p, a, ok := s.oneCall(fresh, sub)
	if !ok {
		return false
	}
	ts, snap := q.ts, q.snap
	envs := envelopes(ts.name, fresh, s.clock.Now().UTC())
	seen := false
	for _, j := range fresh {
		seen = seen || j.id != ""
	}
	ks, args, err := p.SubmitPart(envs, seen)
	if err != nil {
		return false // an invalid job: the enqueue answers it
	}
	c := all
	if len(fresh) < len(jobs) {
		c, _ = chargeOf(ts, fresh)
	}
	req := limits.Request{Tenant: ts.name, Policies: c.policies, Costs: c.costs, Cost: c.total,
		MaxBacklog: ts.maxBacklog, Now: s.scriptNow()}
	// Bounded as an enqueue is (enqueue): the jobs may be queued once sent.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(q.r.Context()), min(snap.shutdown, p.Timeout()))
	start := time.Now()
	res, err := a.Submit(ctx, req, limits.Then{Keys: ks, Args: args})
	cancel()
	s.metrics.admissionDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return s.submitFailed(q, jobs, sub, envs, p, start, err)
	}
	if pr := s.judge(q.w, snap, ts, &c, verdict{decision: res.Decision}); pr != nil {
		s.giveBack(q.r.Context(), snap, ts, sub)
		s.fail(q, pr)
		return true
	}
	p.Observe(start, len(envs), nil)
	s.accept(q, sub, envs)
	return true
}

// submitFailed answers a submit that failed with err when it may have run
// (a 503 with an unknown outcome, the ids kept as unknown), and returns
// false otherwise: nothing ran, and the two-step path decides.
func (s *Server) submitFailed(q *request, jobs []job, sub *submission, envs []queue.Envelope, p *redisq.Producer, start time.Time, err error) bool {
	if errors.Is(err, limits.ErrInvalidRequest) {
		return false // nothing was sent: admission answers it (a 500)
	}
	qerr := redisq.SubmitError(q.ts.name, err)
	if !errors.Is(qerr, queue.ErrUnknownOutcome) {
		return false
	}
	p.Observe(start, len(envs), qerr)
	s.warnRepeat(q.ts.name, "submit failed, outcome unknown", "jobs", len(envs), "err", err)
	s.keepUnknown(q.r.Context(), q.snap, q.ts, jobs, sub, envs)
	s.fail(q, unknownDetail(enqueueProblem(q.snap, q.ts.name, qerr), q.snap, jobs, sub))
	return true
}
