package kafkaq

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// This file holds the Kafka consumer's queue.Consumer methods that hand jobs
// out (Claim, Extend); settle.go settles them.

// Claim takes tenant's next job: a deferred retry that is due, else the
// head of its FIFOs, round robin across partitions. When there is none it
// waits up to ClaimWait for one to arrive (or a retry to fall due) and then
// returns nil with a zero wait, so the caller may ask again at once. The
// cancel marker (keys.JobState) is read from Redis; when Redis fails the
// job is handed out as not cancelled.
func (c *Consumer) Claim(ctx context.Context, tenant string) (*queue.Claimed, time.Duration, error) {
	es := c.pop(ctx, tenant, 1)
	if len(es) == 0 {
		return nil, 0, nil
	}
	e := es[0]
	job := c.newClaimed(ctx, e, tenant)
	c.mu.Lock()
	c.claimed[job] = e
	c.holdLocked(job, e)
	c.mu.Unlock()
	return job, 0, nil
}

// pop takes up to k of tenant's jobs (deferred retries that are due first,
// then the heads of its FIFOs in turn), counted as claimed in their
// partitions, and returns them for the caller to register in c.claimed.
// When there is none it waits up to ClaimWait for one to arrive (or a retry
// to fall due) and then returns none; also when ctx ends.
func (c *Consumer) pop(ctx context.Context, tenant string, k int) []*entry {
	var es []*entry
	c.waitFor(ctx, tenant, func(tq *tenantQueue, now time.Time) (bool, time.Time) {
		e, due := popLocked(tq, now)
		for e != nil {
			e.fifo.p.claimed++
			es = append(es, e)
			if len(es) == k {
				break
			}
			e, _ = popLocked(tq, now)
		}
		return len(es) > 0, due
	})
	return es
}

// WaitJobs waits, as Take does when there is none, up to ClaimWait until
// tenant has a job Take would hand out now (a due retry or a FIFO head),
// and reports whether it has, taking nothing: a drainer waits here before it
// reserves room for a take, so an idle lane holds no room while it waits.
// It implements queue.JobWaiter.
func (c *Consumer) WaitJobs(ctx context.Context, tenant string) bool {
	return c.waitFor(ctx, tenant, func(tq *tenantQueue, now time.Time) (bool, time.Time) {
		if tq.readyBy(now) {
			return true, time.Time{}
		}
		if len(tq.deferred) > 0 {
			return false, tq.deferred[0].due
		}
		return false, time.Time{}
	})
}

// waitFor runs try under c.mu with tenant's queue until it reports done,
// waiting between tries for the queue's wake, or for the due time try
// answered (a deferred retry), at most ClaimWait in all. It reports whether
// try was done; false when the wait ran out or ctx ended.
func (c *Consumer) waitFor(ctx context.Context, tenant string, try func(tq *tenantQueue, now time.Time) (bool, time.Time)) bool {
	deadline := time.Now().Add(c.cfg.ClaimWait)
	for {
		now := c.clock.Now()
		c.mu.Lock()
		tq := c.tenantLocked(tenant)
		done, due := try(tq, now)
		wake := tq.wake
		c.mu.Unlock()
		if done {
			return true
		}
		wait := time.Until(deadline)
		if !due.IsZero() {
			wait = min(wait, due.Sub(now))
		}
		if wait <= 0 {
			if !due.IsZero() && !due.After(now) {
				continue
			}
			return false
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// newClaimed decodes e into a claimed job of tenant (decodeEntry) and reads
// its cancel marker from Redis (lua/job_cancelled.lua), with the last
// heartbeat of a heartbeat job and whether this very job is done already
// (queue.Claimed.Duplicate); when Redis fails, or answers something else,
// the job is handed out as not cancelled and with no beat read (so not
// lapsed).
func (c *Consumer) newClaimed(ctx context.Context, e *entry, tenant string) *queue.Claimed {
	job := c.decodeEntry(e, tenant)
	env := job.Envelope
	if job.DecodeErr == nil && c.rdb != nil {
		v, err := jobCancelledCall(tenant, env.ID, env.HeartbeatMS > 0).Run(ctx, c.rdb).Result()
		var r cancelledReply
		if err == nil {
			r, err = parseJobCancelled(v)
		}
		if err == nil {
			job.Cancelled, job.BeatAt, job.Now = r.Cancelled, msTime(r.BeatMS), msTime(r.NowMS)
			job.Duplicate = queue.SameJob(env, r.DoneMS)
		}
		if err != nil && ctx.Err() == nil {
			c.m.redisErrs.WithLabelValues("cancel_check").Inc()
		}
	}
	return job
}

// decodeEntry decodes e into a claimed job of tenant with a fresh token,
// reading nothing from Redis. A job that does not decode, or belongs to
// another tenant, is poison: DecodeErr is set and the envelope holds the id
// from the message header (or the job's place in the log), the tenant and
// cost 1.
func (c *Consumer) decodeEntry(e *entry, tenant string) *queue.Claimed {
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
	env.Cost = queue.ClaimCost(env.Cost)
	job := queue.NewClaimed(env.ID + "|" + c.prefix + "." + strconv.FormatUint(c.seq.Add(1), 36))
	job.Envelope, job.Raw, job.DecodeErr = env, e.raw, derr
	job.Source, job.Offset = strconv.Itoa(e.fifo.p.id), e.offset
	return job
}

// msTime is unix ms as a time; 0 (none) is the zero time.
func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
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
	if k := sameKey(job.Envelope); c.holding[k] == job {
		delete(c.holding, k)
	}
	e.fifo.p.claimed--
	signal(c.settled)
	return e
}

// sameKey names one job, a copy of it included: its tenant, id and
// enqueued_at (ids are the tenant's own).
func sameKey(env queue.Envelope) string {
	return env.Tenant + "/" + env.ID + "@" + strconv.FormatInt(env.EnqueuedAt.UnixNano(), 10)
}

// holdLocked marks job, claimed from entry e, a duplicate when another copy
// of it (the same id and enqueued_at, as two produces of one envelope after
// an unknown outcome leave) is claimed now from a partition this consumer
// owns in this generation, both partitions still active: that one's
// delivery settles the job. Its record stays uncommitted until then, so a
// revoke hands it to the next owner again (in the same partition the offset
// window cannot pass the held one either; a copy in another partition, as
// when the topic gained partitions between the produce and its retry, is
// settled unsent). A copy held from an earlier generation (a delivery the
// revoke wait gave up on) does not count: it may still fail. Otherwise job
// becomes the holder of its key.
func (c *Consumer) holdLocked(job *queue.Claimed, e *entry) {
	if job.DecodeErr != nil {
		return
	}
	k := sameKey(job.Envelope)
	if h, ok := c.holding[k]; ok {
		if he := c.claimed[h]; he != nil && he.fifo.p.state == partActive && e.fifo.p.state == partActive {
			job.Duplicate = true
			return
		}
	}
	c.holding[k] = job
}
