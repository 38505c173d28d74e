package queue

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// This file holds the Kafka consumer's queue.Consumer methods that hand jobs
// out and settle them.

// Claim takes tenant's next job: a deferred retry that is due, else the
// head of its lanes, round robin across partitions. When there is none it
// waits up to ClaimWait for one to arrive (or a retry to fall due) and then
// returns nil with a zero wait, so the caller may ask again at once. The
// cancel marker (keys.JobState) is read from Redis; when Redis fails the
// job is handed out as not cancelled.
func (c *KafkaConsumer) Claim(ctx context.Context, tenant string) (*Claimed, time.Duration, error) {
	deadline := time.Now().Add(c.cfg.ClaimWait)
	for {
		now := time.Now()
		c.mu.Lock()
		tq := c.tenantLocked(tenant)
		e, due := popLocked(tq, now)
		if e != nil {
			e.lane.p.claimed++
			c.mu.Unlock()
			job := c.newClaimed(ctx, e, tenant)
			c.mu.Lock()
			c.claimed[job] = e
			c.mu.Unlock()
			return job, 0, nil
		}
		wake := tq.wake
		c.mu.Unlock()
		wait := deadline.Sub(now)
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
// the log), the tenant and cost 1.
func (c *KafkaConsumer) newClaimed(ctx context.Context, e *entry, tenant string) *Claimed {
	job := &Claimed{Raw: e.raw}
	env, derr := Decode(e.raw)
	if derr == nil && env.Tenant != tenant {
		derr = fmt.Errorf("queue: job %s of tenant %q found in the lane of %q", env.ID, env.Tenant, tenant)
	}
	if derr != nil {
		id := e.jobID
		if id == "" {
			id = sourceOf(c.cfg.Kafka.Topic, e.lane.p.id, e.offset)
		}
		job.DecodeErr = derr
		env = Envelope{Version: EnvelopeVersion, ID: id, Tenant: tenant, Cost: 1}
	}
	if env.Cost < 1 {
		env.Cost = 1
	}
	job.Envelope = env
	job.member = env.ID + "|" + c.prefix + "." + strconv.FormatUint(c.seq.Add(1), 36)
	if derr == nil && c.rdb != nil {
		n, err := lua.JobCancelled.Run(ctx, c.rdb, []string{keys.JobState(tenant, env.ID)}).Int64()
		if err != nil && ctx.Err() == nil {
			c.m.redisErrs.WithLabelValues("cancel_check").Inc()
		}
		job.Cancelled = n == 1
	}
	return job
}

// Extend keeps nothing alive (Kafka holds no lease): it returns the jobs
// whose partition this consumer no longer owns (revoked in a rebalance),
// which the partition's new owner delivers again.
func (c *KafkaConsumer) Extend(ctx context.Context, tenant string, jobs []*Claimed) ([]*Claimed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lost []*Claimed
	for _, j := range jobs {
		if e, ok := c.claimed[j]; !ok || e.lane.p.state == partRevoked {
			lost = append(lost, j)
		}
	}
	return lost, nil
}

// takeLocked removes job from the claimed set and returns its entry, or nil
// when the job is not held (settled already, or not from this consumer).
func (c *KafkaConsumer) takeLocked(job *Claimed) *entry {
	e, ok := c.claimed[job]
	if !ok {
		return nil
	}
	delete(c.claimed, job)
	e.lane.p.claimed--
	signal(c.settled)
	return e
}

// Finish ends a job: for a dead one it first writes the dead-letter record
// to the DLQ topic (acks=all; when that fails the job is handed out again
// after a second and the error wraps ErrUnavailable), then lowers the
// tenant's backlog by the job's cost (lua/backlog_decr.lua) and records its
// state (package jobstate) in one pipelined round trip (a Redis failure is
// logged and counted, not returned: the job is done), then marks its
// offset finished so the watermark can pass it. It returns ErrLeaseLost
// when the job's partition was revoked meanwhile: its new owner delivers it
// again.
func (c *KafkaConsumer) Finish(ctx context.Context, job *Claimed, dead *DeadLetter) error {
	c.mu.Lock()
	e, ok := c.claimed[job]
	if !ok || e.lane.p.state == partRevoked {
		c.takeLocked(job)
		c.mu.Unlock()
		return fmt.Errorf("queue: finish %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	c.mu.Unlock()
	if dead != nil {
		if err := c.dlq.write(ctx, job, dead, sourceOf(c.cfg.Kafka.Topic, e.lane.p.id, e.offset)); err != nil {
			c.m.errors.WithLabelValues("dlq").Inc()
			c.mu.Lock()
			if c.takeLocked(job) != nil && e.lane.p.state == partActive {
				e.due = time.Now().Add(dlqRetryAfter)
				heap.Push(&e.lane.tq.deferred, e)
				signal(e.lane.tq.wake)
			}
			c.mu.Unlock()
			return fmt.Errorf("queue: finish %s: dead letter: %w", job.Envelope.ID, err)
		}
	}
	c.lowerBacklog(ctx, job, dead)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.takeLocked(job) == nil || e.lane.p.state == partRevoked {
		return fmt.Errorf("queue: finish %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	c.finishLocked(e)
	return nil
}

// finishLocked marks e's offset finished and lets it leave memory.
func (c *KafkaConsumer) finishLocked(e *entry) {
	p, ln := e.lane.p, e.lane
	p.win.finish(e.offset)
	ln.held--
	p.held--
	c.releasedLocked(p, ln)
}

// lowerBacklog lowers the tenant's backlog counter by the job's cost and
// records the job's final state (dead, job.Dropped, or done; package
// jobstate), in one pipelined round trip. It outlives ctx's cancellation
// (the job is done either way), bounded by kafkaBacklogTimeout.
func (c *KafkaConsumer) lowerBacklog(ctx context.Context, job *Claimed, dead *DeadLetter) {
	if c.rdb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kafkaBacklogTimeout)
	defer cancel()
	t := job.Envelope.Tenant
	state, lastErr, reason := finishState(job, dead)
	st := jobstate.Settle{Tenant: t, JobID: job.Envelope.ID, Member: job.member, State: state,
		LastError: lastErr, Reason: reason, DeadLettered: dead != nil}.Call()
	decr := lua.Call{Script: lua.BacklogDecr, Keys: []string{keys.Backlog(t)},
		Args: []any{job.Envelope.Cost, keys.BacklogTTL.Milliseconds()}}
	cmds := lua.Exec(ctx, c.rdb, []lua.Call{decr, st}, nil)
	if err := cmds[0].Err(); err != nil {
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

// recordRetrying records the job's state retrying with job.LastError
// (package jobstate), before the job waits in memory for its retry, so a
// later delivery's in_flight is never overwritten. A failure is counted
// and logged: the retry goes on.
func (c *KafkaConsumer) recordRetrying(ctx context.Context, job *Claimed) {
	if c.rdb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kafkaBacklogTimeout)
	defer cancel()
	st := jobstate.Settle{Tenant: job.Envelope.Tenant, JobID: job.Envelope.ID, Member: job.member,
		State: jobstate.Retrying, LastError: job.LastError}.Call()
	if err := st.Run(ctx, c.rdb).Err(); err != nil {
		c.m.redisErrs.WithLabelValues("job_state").Inc()
		c.log.Warn("kafka consumer: job state not recorded; the retry goes on",
			"tenant", job.Envelope.Tenant, "job_id", job.Envelope.ID, "err", err)
	}
}

// Defer records the job's state retrying (package jobstate), then holds
// the job in memory for delay and hands it out again as next (its offset
// stays unfinished meanwhile, so a crash delivers it again). It returns
// ErrLeaseLost when the job's partition is being let go.
func (c *KafkaConsumer) Defer(ctx context.Context, job *Claimed, delay time.Duration, next Envelope) error {
	raw, err := next.Encode()
	if err != nil {
		return fmt.Errorf("queue: defer %s: %w", job.Envelope.ID, err)
	}
	c.recordRetrying(ctx, job)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.takeLocked(job)
	if e == nil || e.lane.p.state != partActive {
		return fmt.Errorf("queue: defer %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	e.raw, e.due = raw, time.Now().Add(max(delay, 0))
	heap.Push(&e.lane.tq.deferred, e)
	signal(e.lane.tq.wake)
	return nil
}

// Release puts the job back at the head of its lane, unchanged. It returns
// ErrLeaseLost when the job's partition is being let go.
func (c *KafkaConsumer) Release(ctx context.Context, job *Claimed) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.takeLocked(job)
	if e == nil || e.lane.p.state != partActive {
		return fmt.Errorf("queue: release %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	e.lane.q.pushFront(e)
	signal(e.lane.tq.wake)
	return nil
}
