package kafkaq

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// This file holds the Kafka consumer's settles: Finish, Defer, Release.

// Finish ends a job as out says: for a dead one it first writes the dead-letter record
// to the DLQ topic (acks=all; when that fails the job is handed out again
// after a second and the error wraps queue.ErrUnavailable), then lowers the
// tenant's backlog by the job's cost and records its state (package
// jobstate) in one script call, lua/kafka_finish.lua, shared with
// concurrent finishes (a Redis failure is counted and the write held: the
// job is done, its offset waits until Redis takes the write, holdFinish),
// then marks its
// offset finished so the watermark can pass it. It returns queue.ErrLeaseLost
// when the job's partition was revoked meanwhile: its new owner delivers it
// again.
func (c *Consumer) Finish(ctx context.Context, job *queue.Claimed, out queue.Outcome) error {
	c.mu.Lock()
	e, ok := c.claimed[job]
	if !ok || e.fifo.p.state == partRevoked {
		c.takeLocked(job)
		c.mu.Unlock()
		if out == (queue.Outcome{}) { // delivered
			c.recordDone(ctx, job)
		}
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
	if err := c.lowerBacklog(ctx, job, out); lua.NoReply(err) {
		return c.holdFinish(job, e, out) // perhaps not written: sent again later
	}
	return c.finishClaimed(job, e)
}

// finishClaimed ends the claimed job (its entry e) once its Redis write is
// done: its offset finished, or queue.ErrLeaseLost when its partition was
// revoked meanwhile.
func (c *Consumer) finishClaimed(job *queue.Claimed, e *entry) error {
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

// lowerBacklog lowers the tenant's backlog counter by the job's cost and
// records the job's final state (out.State; package jobstate; nothing for a
// duplicate), in one script call (lua/kafka_finish.lua) that concurrent
// finishes send in shared pipelines (finishPipelines), a tenant's together
// in one call (newFinishGroup). It outlives ctx's
// cancellation (the job is done either way), bounded by backlogTimeout; a
// failure is counted in sluice_redis_errors_total{op="finish"}, logged at
// most once per tenant per quietEvery, and returned: Finish then holds the
// job's offset and writes again until Redis takes it (holdFinish).
func (c *Consumer) lowerBacklog(ctx context.Context, job *queue.Claimed, out queue.Outcome) error {
	if c.rdb == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backlogTimeout)
	defer cancel()
	t := job.Envelope.Tenant
	state, lastErr, reason := out.State()
	st := jobstate.Settle{Tenant: t, JobID: job.Envelope.ID, Member: job.Token(), State: state,
		LastError: lastErr, Reason: reason, Refresh: c.refresh.Due(t, c.clock.Now())}
	if out.Dead != nil {
		// The DLQ topic has the letter already; a failure here loses only
		// its listing (logged below with the state).
		st.DeadLetter, _ = dlq.Encode(*out.Dead, job.Raw)
		st.DiedAt = out.Dead.At
	}
	rec := claimedSource(c.cfg.Kafka.Topic, job.Source, job.Offset)
	if _, err := c.finishes.Do(ctx, kafkaFinish{Settle: st, Cost: job.Envelope.Cost, Record: rec}); err != nil {
		c.m.redisErrs.WithLabelValues("finish").Inc()
		c.quiet.Warn("finish/"+t, "kafka consumer: backlog counter not lowered nor job state recorded; written again until Redis takes it",
			"tenant", t, "job_id", job.Envelope.ID, "state", state, "err", err)
		return err
	}
	return nil
}

// recordDone records a delivered job's state done after its partition was
// revoked (package jobstate), without lowering the backlog: the new owner
// hands the job out again, finds it done (queue.Claimed.Duplicate) and
// settles that copy unsent, lowering the backlog once. A failure is counted:
// the job is then delivered again (at least once).
func (c *Consumer) recordDone(ctx context.Context, job *queue.Claimed) {
	if c.rdb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backlogTimeout)
	defer cancel()
	st := jobstate.Settle{Tenant: job.Envelope.Tenant, JobID: job.Envelope.ID, Member: job.Token(), State: jobstate.Done}.Call()
	if err := settled(st.Run(ctx, c.rdb)); err != nil {
		c.m.redisErrs.WithLabelValues("job_state").Inc()
	}
}

// recordRetrying records the job's state retrying with lastError, due at
// due (package jobstate), before the job waits in memory for its retry, so a
// later delivery's in_flight is never overwritten. A failure is counted
// and logged: the retry goes on.
func (c *Consumer) recordRetrying(ctx context.Context, job *queue.Claimed, lastError string, due time.Time) {
	if c.rdb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backlogTimeout)
	defer cancel()
	st := jobstate.Settle{Tenant: job.Envelope.Tenant, JobID: job.Envelope.ID, Member: job.Token(),
		State: jobstate.Retrying, LastError: lastError, Due: due}.Call()
	if err := settled(st.Run(ctx, c.rdb)); err != nil {
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
	c.recordRetrying(ctx, job, r.LastError, c.clock.Now().Add(max(r.Delay, 0)))
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
	if c.releaseLocked(job) == nil {
		return fmt.Errorf("queue: release %s: %w", job.Envelope.ID, queue.ErrLeaseLost)
	}
	return nil
}

// Untake is Release for a job its take started (queue.Claimed.Started)
// that was not sent: the job goes back to the head of its FIFO and, in one
// Redis call (lua/kafka_untake.lua), its delivery leaves keys.Delivering
// and its recorded start is undone (state queued, the attempt number back).
// A Redis failure is counted (sluice_redis_errors_total{op="untake"}), not
// returned: the job is back either way. It implements queue.Untaker.
func (c *Consumer) Untake(ctx context.Context, job *queue.Claimed) error {
	c.mu.Lock()
	e := c.releaseLocked(job)
	c.mu.Unlock()
	if e == nil {
		return fmt.Errorf("queue: release %s: %w", job.Envelope.ID, queue.ErrLeaseLost)
	}
	if c.rdb == nil || job.Started == 0 {
		return nil
	}
	t := job.Envelope.Tenant
	call := lua.Call{Script: lua.KafkaUntake, Keys: []string{keys.JobState(t, job.Envelope.ID), keys.Delivering(t)},
		Args: []any{job.Started, job.Token()}}
	v, err := call.Run(ctx, c.rdb).Result()
	if err == nil {
		_, err = lua.KafkaUntake.Int(v, "undone")
	}
	if err != nil && ctx.Err() == nil {
		c.m.redisErrs.WithLabelValues("untake").Inc()
	}
	return nil
}

// releaseLocked unregisters job (takeLocked) and puts its entry back at the
// head of its FIFO, returning the entry; nil when the job is not held or
// its partition is being let go (the partition's next owner reads it).
func (c *Consumer) releaseLocked(job *queue.Claimed) *entry {
	e := c.takeLocked(job)
	if e == nil || e.fifo.p.state != partActive {
		return nil
	}
	e.fifo.q.pushFront(e)
	signal(e.fifo.tq.wake)
	return e
}

// Holds reports whether job is still this consumer's to deliver
// (queue.Holder): claimed, and its partition not being let go. A job that
// waited for a slot or a turn while a rebalance revoked its partition must
// not start: after revoke_timeout its next owner delivers it.
func (c *Consumer) Holds(job *queue.Claimed) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.claimed[job]
	return ok && e.fifo.p.state == partActive
}

// settled is the error of a job_state_settle.lua call: Redis's, or a reply
// jobstate.SettleReply refuses.
func settled(cmd *redis.Cmd) error {
	v, err := cmd.Result()
	if err != nil {
		return err
	}
	return jobstate.SettleReply(v)
}
