package kafkaq

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// This file holds the Kafka consumer's queue.Consumer methods that hand jobs
// out and settle them.

// Claim takes tenant's next job: a deferred retry that is due, else the
// head of its FIFOs, round robin across partitions. When there is none it
// waits up to ClaimWait for one to arrive (or a retry to fall due) and then
// returns nil with a zero wait, so the caller may ask again at once. The
// cancel marker (keys.JobState) is read from Redis; when Redis fails the
// job is handed out as not cancelled.
func (c *Consumer) Claim(ctx context.Context, tenant string) (*queue.Claimed, time.Duration, error) {
	deadline := time.Now().Add(c.cfg.ClaimWait)
	for {
		now := c.clock.Now()
		c.mu.Lock()
		tq := c.tenantLocked(tenant)
		e, due := popLocked(tq, now)
		if e != nil {
			e.fifo.p.claimed++
			c.mu.Unlock()
			job := c.newClaimed(ctx, e, tenant)
			c.mu.Lock()
			c.claimed[job] = e
			c.mu.Unlock()
			return job, 0, nil
		}
		wake := tq.wake
		c.mu.Unlock()
		wait := time.Until(deadline)
		if !due.IsZero() {
			wait = min(wait, due.Sub(now))
		}
		if wait <= 0 {
			if !due.IsZero() && !due.After(now) {
				continue
			}
			return nil, 0, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, nil
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// newClaimed decodes e into a claimed job of tenant. A job that does not
// decode, or belongs to another tenant, is poison: DecodeErr is set and
// the envelope holds the id from the message header (or the job's place in
// the log), the tenant and cost 1. The cancel marker is read from Redis
// (lua/job_cancelled.lua); when Redis fails, or answers something else, the
// job is handed out as not cancelled.
func (c *Consumer) newClaimed(ctx context.Context, e *entry, tenant string) *queue.Claimed {
	env, derr := queue.Decode(e.raw)
	if derr == nil && env.Tenant != tenant {
		derr = fmt.Errorf("queue: job %s of tenant %q found in the queue of %q", env.ID, env.Tenant, tenant)
	}
	if derr != nil {
		id := e.jobID
		if id == "" {
			id = sourceOf(c.cfg.Kafka.Topic, e.fifo.p.id, e.offset)
		}
		env = queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: tenant, Cost: 1}
	}
	if env.Cost < 1 {
		env.Cost = 1
	}
	job := queue.NewClaimed(env.ID + "|" + c.prefix + "." + strconv.FormatUint(c.seq.Add(1), 36))
	job.Envelope, job.Raw, job.DecodeErr = env, e.raw, derr
	if derr == nil && c.rdb != nil {
		v, err := jobCancelledCall(tenant, env.ID).Run(ctx, c.rdb).Result()
		if err == nil {
			job.Cancelled, err = parseJobCancelled(v)
		}
		if err != nil && ctx.Err() == nil {
			c.m.redisErrs.WithLabelValues("cancel_check").Inc()
		}
	}
	return job
}

// Extend keeps nothing alive (Kafka holds no lease): it returns the jobs
// whose partition this consumer no longer owns (revoked in a rebalance),
// which the partition's new owner delivers again.
func (c *Consumer) Extend(ctx context.Context, tenant string, jobs []*queue.Claimed) ([]*queue.Claimed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lost []*queue.Claimed
	for _, j := range jobs {
		if e, ok := c.claimed[j]; !ok || e.fifo.p.state == partRevoked {
			lost = append(lost, j)
		}
	}
	return lost, nil
}

// takeLocked removes job from the claimed set and returns its entry, or nil
// when the job is not held (settled already, or not from this consumer).
func (c *Consumer) takeLocked(job *queue.Claimed) *entry {
	e, ok := c.claimed[job]
	if !ok {
		return nil
	}
	delete(c.claimed, job)
	e.fifo.p.claimed--
	signal(c.settled)
	return e
}

// Finish ends a job as out says: for a dead one it first writes the dead-letter record
// to the DLQ topic (acks=all; when that fails the job is handed out again
// after a second and the error wraps queue.ErrUnavailable), then lowers the
// tenant's backlog by the job's cost (lua/backlog_decr.lua) and records its
// state (package jobstate) in one pipelined round trip (a Redis failure is
// logged and counted, not returned: the job is done), then marks its
// offset finished so the watermark can pass it. It returns queue.ErrLeaseLost
// when the job's partition was revoked meanwhile: its new owner delivers it
// again.
func (c *Consumer) Finish(ctx context.Context, job *queue.Claimed, out queue.Outcome) error {
	c.mu.Lock()
	e, ok := c.claimed[job]
	if !ok || e.fifo.p.state == partRevoked {
		c.takeLocked(job)
		c.mu.Unlock()
		return fmt.Errorf("queue: finish %s: %w", job.Envelope.ID, queue.ErrLeaseLost)
	}
	c.mu.Unlock()
	if out.Dead != nil {
		if err := c.dlq.write(ctx, job, out.Dead, sourceOf(c.cfg.Kafka.Topic, e.fifo.p.id, e.offset)); err != nil {
			c.m.errors.WithLabelValues("dlq").Inc()
			c.retryDeadLetter(job, e)
			return fmt.Errorf("queue: finish %s: dead letter: %w", job.Envelope.ID, err)
		}
	}
	c.lowerBacklog(ctx, job, out)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.takeLocked(job) == nil || e.fifo.p.state == partRevoked {
		return fmt.Errorf("queue: finish %s: %w", job.Envelope.ID, queue.ErrLeaseLost)
	}
	c.finishLocked(e)
	return nil
}

// retryDeadLetter hands job out again after dlqRetryAfter, when its dead
// letter could not be written (and its partition is still owned).
func (c *Consumer) retryDeadLetter(job *queue.Claimed, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.takeLocked(job) != nil && e.fifo.p.state == partActive {
		e.due = c.clock.Now().Add(dlqRetryAfter)
		heap.Push(&e.fifo.tq.deferred, e)
		signal(e.fifo.tq.wake)
	}
}

// finishLocked marks e's offset finished and lets it leave memory.
func (c *Consumer) finishLocked(e *entry) {
	p, f := e.fifo.p, e.fifo
	p.win.finish(e.offset)
	f.held--
	p.held--
	c.releasedLocked(p, f)
}

// lowerBacklog lowers the tenant's backlog counter by the job's cost
// (lua/backlog_decr.lua) and records the job's final state (out.State;
// package jobstate), in one pipelined round trip. It outlives ctx's cancellation
// (the job is done either way), bounded by backlogTimeout.
func (c *Consumer) lowerBacklog(ctx context.Context, job *queue.Claimed, out queue.Outcome) {
	if c.rdb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backlogTimeout)
	defer cancel()
	t := job.Envelope.Tenant
	state, lastErr, reason := out.State()
	st := jobstate.Settle{Tenant: t, JobID: job.Envelope.ID, Member: job.Token(), State: state,
		LastError: lastErr, Reason: reason, DeadLettered: out.Dead != nil}.Call()
	cmds := lua.Exec(ctx, c.rdb, []lua.Call{backlogDecrCall(t, job.Envelope.Cost), st}, nil)
	err := cmds[0].Err()
	if err == nil {
		_, err = parseBacklogDecr(cmds[0].Val())
	}
	if err != nil {
		c.m.redisErrs.WithLabelValues("backlog_decr").Inc()
		c.log.Error("kafka consumer: backlog counter not lowered; the job is finished",
			"tenant", t, "job_id", job.Envelope.ID, "err", err)
	}
	if err := cmds[1].Err(); err != nil {
		c.m.redisErrs.WithLabelValues("job_state").Inc()
		c.log.Warn("kafka consumer: job state not recorded; the job is finished",
			"tenant", t, "job_id", job.Envelope.ID, "state", state, "err", err)
	}
}

// recordRetrying records the job's state retrying with lastError
// (package jobstate), before the job waits in memory for its retry, so a
// later delivery's in_flight is never overwritten. A failure is counted
// and logged: the retry goes on.
func (c *Consumer) recordRetrying(ctx context.Context, job *queue.Claimed, lastError string) {
	if c.rdb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backlogTimeout)
	defer cancel()
	st := jobstate.Settle{Tenant: job.Envelope.Tenant, JobID: job.Envelope.ID, Member: job.Token(),
		State: jobstate.Retrying, LastError: lastError}.Call()
	if err := st.Run(ctx, c.rdb).Err(); err != nil {
		c.m.redisErrs.WithLabelValues("job_state").Inc()
		c.log.Warn("kafka consumer: job state not recorded; the retry goes on",
			"tenant", job.Envelope.Tenant, "job_id", job.Envelope.ID, "err", err)
	}
}

// Defer records the job's state retrying with r.LastError (package
// jobstate), then holds the job in memory for r.Delay and hands it out
// again as r.Next (its offset
// stays unfinished meanwhile, so a crash delivers it again). It returns
// queue.ErrLeaseLost when the job's partition is being let go.
func (c *Consumer) Defer(ctx context.Context, job *queue.Claimed, r queue.Retry) error {
	raw, err := r.Next.Encode()
	if err != nil {
		return fmt.Errorf("queue: defer %s: %w", job.Envelope.ID, err)
	}
	c.recordRetrying(ctx, job, r.LastError)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.takeLocked(job)
	if e == nil || e.fifo.p.state != partActive {
		return fmt.Errorf("queue: defer %s: %w", job.Envelope.ID, queue.ErrLeaseLost)
	}
	e.raw, e.due = raw, c.clock.Now().Add(max(r.Delay, 0))
	heap.Push(&e.fifo.tq.deferred, e)
	signal(e.fifo.tq.wake)
	return nil
}

// Release puts the job back at the head of its FIFO, unchanged. It returns
// queue.ErrLeaseLost when the job's partition is being let go.
func (c *Consumer) Release(ctx context.Context, job *queue.Claimed) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.takeLocked(job)
	if e == nil || e.fifo.p.state != partActive {
		return fmt.Errorf("queue: release %s: %w", job.Envelope.ID, queue.ErrLeaseLost)
	}
	e.fifo.q.pushFront(e)
	signal(e.fifo.tq.wake)
	return nil
}
