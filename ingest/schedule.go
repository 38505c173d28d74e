package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/scheduler"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// Scheduled and heartbeat jobs on the submission path.
//
// A job with "not_before" (RFC 3339) or "delay" (a Go duration, >= 0), not
// both, due after now, is a scheduled job: it passes admission like any job
// but is stored outside the queue (internal/scheduler.Add) until a
// drainer's scheduler moves it onto the queue when due. A due time at or
// before now makes an ordinary job. A due time beyond now +
// ingest.max_delay is a 422; a tenant over ingest.max_scheduled scheduled
// jobs a 429. A job with "heartbeat" (a Go duration, MinHeartbeat to
// MaxHeartbeat) is a heartbeat job: see heartbeat.go.

// The bounds of a job's heartbeat interval.
const (
	MinHeartbeat = time.Second
	MaxHeartbeat = 24 * time.Hour
)

// validateTiming checks and sets j's due time and heartbeat from req:
// not_before and delay together are a 422 naming both; a malformed value
// is a 400 naming its field; a negative delay, a due time beyond
// maxDelay, a deadline not after the due time, or a heartbeat outside
// MinHeartbeat..MaxHeartbeat a 422.
func validateTiming(j job, req jobRequest, now time.Time, maxDelay time.Duration) (job, *problem) {
	prefix := j.field
	unprocessable := func(name, format string, args ...any) (job, *problem) {
		f := fieldName(prefix, name)
		return job{}, newProblem(http.StatusUnprocessableEntity, f, f+" "+fmt.Sprintf(format, args...))
	}
	malformed := func(name, want, got string) (job, *problem) {
		f := fieldName(prefix, name)
		return job{}, newProblem(http.StatusBadRequest, f, fmt.Sprintf("%s must be %s (got %q)", f, want, got))
	}
	var due time.Time
	switch {
	case req.NotBefore != nil && req.Delay != nil:
		nb, d := fieldName(prefix, "not_before"), fieldName(prefix, "delay")
		return job{}, newProblem(http.StatusUnprocessableEntity, nb+","+d,
			fmt.Sprintf("%s and %s are both given; give one of them", nb, d))
	case req.NotBefore != nil:
		t, err := time.Parse(time.RFC3339Nano, *req.NotBefore)
		if err != nil {
			return malformed("not_before", "an RFC 3339 time such as 2026-01-02T15:04:05Z", *req.NotBefore)
		}
		due, j.timing = t, "not_before="+*req.NotBefore
	case req.Delay != nil:
		d, err := time.ParseDuration(*req.Delay)
		if err != nil {
			return malformed("delay", `a Go duration such as "90s" or "1h30m"`, *req.Delay)
		}
		if d < 0 {
			return unprocessable("delay", "must be >= 0 (got %s)", *req.Delay)
		}
		due, j.timing = now.Add(d), "delay="+*req.Delay
	}
	if due.After(now) {
		if due.Sub(now) > maxDelay {
			name := "not_before"
			if req.Delay != nil {
				name = "delay"
			}
			return unprocessable(name, "is %s ahead, beyond ingest.max_delay (%s)", due.Sub(now), maxDelay)
		}
		if j.deadline != nil && !j.deadline.After(due) {
			return unprocessable("deadline", "must be after the due time (%s)", due.UTC().Format(time.RFC3339))
		}
		j.due = &due
	}
	if req.Heartbeat != nil {
		hb, err := time.ParseDuration(*req.Heartbeat)
		if err != nil {
			return malformed("heartbeat", `a Go duration such as "30s"`, *req.Heartbeat)
		}
		if hb < MinHeartbeat || hb > MaxHeartbeat {
			return unprocessable("heartbeat", "must be between %s and %s (got %s)", MinHeartbeat, MaxHeartbeat, *req.Heartbeat)
		}
		j.heartbeat = hb
	}
	return j, nil
}

// splitScheduled returns envs' scheduled jobs (NotBefore set) and the
// others, each in order.
func splitScheduled(envs []queue.Envelope) (sched []scheduler.Job, now []queue.Envelope) {
	for _, e := range envs {
		if e.NotBefore != nil {
			sched = append(sched, scheduler.Job{Envelope: e, Due: *e.NotBefore})
			continue
		}
		now = append(now, e)
	}
	return sched, now
}

// schedule stores tenant's scheduled jobs (internal/scheduler.AddWait,
// waiting for redis.wait_replicas as an enqueue does), bounded like an
// enqueue. A failed hint write is logged: the jobs are stored, and a
// scheduler's sweep finds them. Too few replicas is a 503 whose outcome is
// unknown (queue.ErrUnknownOutcome): the jobs are on the primary, their ids
// stay reserved as unknown (keepUnknown), and a retry stores the same jobs
// again, which replaces them or skips those already moved (schedule_add.lua).
func (s *Server) schedule(ctx context.Context, snap *snapshot, tenant string, jobs []scheduler.Job) *problem {
	if len(jobs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snap.shutdown)
	defer cancel()
	err := scheduler.AddWait(ctx, s.rdb, tenant, jobs, snap.maxScheduled, snap.wait)
	var full *scheduler.FullError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, scheduler.ErrHint):
		s.warnRepeat(tenant, "scheduled jobs stored, hint not written; the scheduler's sweep will find them", "err", err)
		return nil
	case errors.As(err, &full):
		return scheduledFull(tenant, full.Count, full.Max)
	}
	s.warnRepeat(tenant, "storing scheduled jobs failed", "jobs", len(jobs), "err", err)
	detail := "scheduled jobs cannot be stored (redis); retry later"
	unknown := errors.Is(err, queue.ErrUnknownOutcome)
	if unknown {
		detail = "redis did not acknowledge the scheduled jobs in time (or too few redis.wait_replicas replicas did) and they may be stored; " +
			"a retry with the same id stores them at most once"
	}
	p := newProblem(http.StatusServiceUnavailable, "", detail)
	p.Backend, p.RetryAfter, p.Tenant, p.unknown = "redis", retryAfterSeconds(snap.retryAfter), tenant, unknown
	return p
}

// scheduledRoom refuses, before admission charges anything, a request
// whose new scheduled jobs (those without a client id: surely new) would
// take tenant past ingest.max_scheduled as it stands (one ZCARD, only for
// requests that schedule). The store checks again, atomically
// (schedule_add.lua), for what this read cannot see: a client id that
// replaces a stored job, jobs stored meanwhile. A failed read is left to
// that check.
func (s *Server) scheduledRoom(ctx context.Context, snap *snapshot, tenant string, jobs []job) *problem {
	var n int64
	for _, j := range jobs {
		if j.due != nil && j.id == "" {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, snap.redisTimeout)
	defer cancel()
	count, err := s.rdb.ZCard(rctx, keys.JobIndex(tenant, "scheduled")).Result()
	if err != nil || count+n <= snap.maxScheduled {
		return nil
	}
	return scheduledFull(tenant, count, snap.maxScheduled)
}

// scheduledFull is the 429 of a tenant at ingest.max_scheduled.
func scheduledFull(tenant string, count, max int64) *problem {
	p := newProblem(http.StatusTooManyRequests, "", fmt.Sprintf(
		"tenant %s holds %d scheduled jobs; this request's would take it past ingest.max_scheduled (%d)", tenant, count, max))
	p.Type, p.Title, p.Limit, p.Tenant = quotaExceeded, "Too many scheduled jobs", max, tenant
	return p
}

// checkScheduled refuses, with the 422 an enqueue would give now, scheduled
// jobs the queue backend would refuse when they fall due (queue.Checker:
// Kafka's produce request bound), before they are stored: a job stored that
// the queue then refuses could only be dead-lettered by the scheduler.
func (s *Server) checkScheduled(snap *snapshot, tenant string, jobs []scheduler.Job) *problem {
	c, ok := s.producer.(queue.Checker)
	if !ok || len(jobs) == 0 {
		return nil
	}
	envs := make([]queue.Envelope, len(jobs))
	for i := range jobs {
		envs[i] = jobs[i].Envelope
	}
	if err := c.Check(envs); err != nil {
		return enqueueProblem(snap, tenant, err)
	}
	return nil
}

// unschedule removes scheduled jobs stored by a request whose other jobs
// could not be enqueued (the request is refused as a whole), best effort:
// a failure is logged, and those jobs stay scheduled. A job cancelled here
// loses its state hash (a retry then stores it afresh); one no longer
// scheduled (the scheduler moved it meanwhile) keeps its state.
func (s *Server) unschedule(ctx context.Context, snap *snapshot, tenant string, jobs []scheduler.Job) {
	if len(jobs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snap.redisTimeout)
	defer cancel()
	for _, j := range jobs {
		cancelled, _, err := scheduler.Cancel(ctx, s.rdb, tenant, j.Envelope.ID)
		if err != nil {
			s.log.Warn("removing scheduled jobs of a refused request failed", "tenant", tenant, "job_id", j.Envelope.ID, "err", err)
			return
		}
		if cancelled { // else no longer scheduled (moved already): its state stays
			s.rdb.Del(ctx, keys.JobState(tenant, j.Envelope.ID))
		}
	}
}

// cancelScheduled cancels tenant's job id when it is scheduled
// (internal/scheduler.Cancel, one round trip before jobstate.Cancel's):
// done reports it was; otherwise the job is in another state for
// jobstate.Cancel to decide, or err is the Redis failure.
func (s *Server) cancelScheduled(ctx context.Context, tenant, id string) (done bool, err error) {
	done, _, err = scheduler.Cancel(ctx, s.rdb, tenant, id)
	return done, err
}

// makeDurable stores a request's scheduled jobs (schedule), then enqueues
// the others (their heartbeat intervals are recorded by the enqueue's own
// state write); it returns the problem
// to answer when either fails. An enqueue that fails after the scheduled
// jobs were stored removes them again (unschedule), so a refused request
// leaves nothing behind that its retry would add twice.
func (s *Server) makeDurable(ctx context.Context, snap *snapshot, tenant string, envs []queue.Envelope) *problem {
	sched, now := splitScheduled(envs)
	if p := s.checkScheduled(snap, tenant, sched); p != nil {
		return p
	}
	if p := s.schedule(ctx, snap, tenant, sched); p != nil {
		return p
	}
	if len(now) == 0 {
		return nil
	}
	if err := s.enqueue(ctx, snap, now); err != nil {
		s.unschedule(ctx, snap, tenant, sched)
		s.warnRepeat(tenant, "enqueue failed", "jobs", len(now), "err", err)
		return enqueueProblem(snap, tenant, err)
	}
	return nil
}
