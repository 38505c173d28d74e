package drainer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/outflow"
	"github.com/sluicehq/sluice/queue"
)

// errorPause is the first pause of a lane after a backend error; it doubles
// up to errorPauseMax while the backend stays down.
const (
	errorPause    = 100 * time.Millisecond
	errorPauseMax = 5 * time.Second
	// startRetryPause is how long a job whose start could not be recorded
	// waits before it goes back to its queue (giveBackUnstarted).
	startRetryPause = time.Second
)

// claimWaitMin is the least a pull loop sleeps after a claim found no job.
const claimWaitMin = time.Millisecond

// settleTimeout bounds a finish, defer or release call, which must happen
// also while the drainer is shutting down.
const settleTimeout = 5 * time.Second

// pull is one pull loop of a lane: claim → drop when cancelled or expired
// → wait for the concurrency slot and the outflow turn → hand to a dispatch
// goroutine (launch). It holds at most one job while it waits, and ends
// when ctx is done or c.stop reports the tenant removed. An extra loop
// ends when the tenant has an outflow rate or a concurrency cap (the first
// loop starts the extras again, c.spawn, once it has none), and parks on
// c.w while the tenant's queue is empty; the first loop backs its
// polling off while the queue stays empty (idlePoll), unless c.arrived
// wakes it (jobsArrived), wakes the others at each job it claims, and ends
// the lane when the queue stayed empty laneIdleExit and c.idle agrees.
func (d *Drainer) pull(ctx, workCtx context.Context, c *laneCtl, extra bool) {
	tenant := c.tenant
	var pause errorBackoff
	var idle idleBackoff
	for ctx.Err() == nil {
		if c.stop() {
			return
		}
		if d.paused(tenant) {
			d.waitResumed(ctx, tenant)
			idle = idleBackoff{}
			continue
		}
		if tn, _ := d.tenant(tenant); tn.Outflow.Shaped() || tn.Outflow.Concurrency > 0 {
			if extra {
				return // a gated tenant's lane is its first loop
			}
		} else if !extra && laneClaimers > 1 {
			c.spawn()
		}
		woken := c.arrived.wait() // the first loop's idle poll ends early on jobsArrived
		if extra {
			woken = c.w.wait()
		}
		changed := d.tenantsChanged()
		got, wait, live, err := d.claimAndLaunch(ctx, workCtx, tenant, c.dispatches, &c.w, &c.batch)
		if err != nil {
			if !d.pauseAfter(ctx, &pause, changed, errOp(err), "drainer: claim", tenant, err) {
				return
			}
			continue
		}
		pause.reset()
		switch {
		case !live:
			return
		case !got && extra:
			d.park(ctx, woken, c.stop)
		case !got:
			pauseFor := idle.next(wait)
			if idle.emptyFor() >= laneIdleExit && c.idle() {
				return
			}
			sleepOrChange(ctx, pauseFor, woken)
		default:
			idle = idleBackoff{}
		}
	}
}

// claimAndLaunch claims the tenant's next job, or takes several through the
// consumer's queue.Taker when the tenant's outflow has no gate in Redis
// (take), and hands each to launch: got reports whether any job came, wait
// is the consumer's answer when none did, live false that ctx ended (the
// pull loop ends). A job claimed wakes the lane's parked loops (w).
func (d *Drainer) claimAndLaunch(ctx, workCtx context.Context, tenant string, dispatches *sync.WaitGroup, w *laneWake, b *takeBatch) (got bool, wait time.Duration, live bool, err error) {
	if t, ok := d.taker(tenant); ok {
		return d.take(ctx, workCtx, tenant, t, dispatches, w, b)
	}
	if t, o, ok := d.turnTaker(tenant); ok {
		return d.takeTurn(ctx, workCtx, tenant, t, o, dispatches, w, b)
	}
	job, wait, err := d.cfg.Consumer.Claim(ctx, tenant)
	if err != nil || job == nil {
		return false, wait, true, err
	}
	w.wake()
	d.held.add(tenant, job)
	if d.dropUnsent(job, false) {
		return true, 0, true, nil
	}
	return true, 0, d.launch(ctx, workCtx, job, dispatches, false, time.Time{}), nil
}

// launch waits for job's concurrency slot and outflow turn, then for room
// among the MaxInFlight dispatches, and hands the job to a dispatch
// goroutine. Every ask of the semaphore and the bucket reads the tenant's
// current outflow, so a change reaches a job already waiting. A job whose
// tenant was removed or paused meanwhile (up to the moment of its dispatch)
// goes back to the head of the queue, and one the bucket
// can never pass to the dead-letter queue. It reports false when ctx ended
// first (the job released): the pull loop ends. at is the job's send time
// on the bucket's clock when a take started it with its turn (sendClock;
// zero: none), else the one of the turn waitTurn takes; the dispatch
// waits for it (waitSend).
func (d *Drainer) launch(ctx, workCtx context.Context, job *queue.Claimed, dispatches *sync.WaitGroup, reserved bool, at time.Time) bool {
	giveRoom := func() {
		if reserved {
			d.unreserve(1)
		}
	}
	slot, f, capacity, o, turnAt := d.passGates(ctx, job)
	if job.Started == 0 {
		at = turnAt
	}
	if f != flowGo {
		giveRoom()
	}
	switch f {
	case flowStop:
		d.releaseSlot(job, slot)
		d.giveBack(job)
		return false
	case flowRemoved, flowPaused:
		// Removed or paused since the claim: back to the head of the
		// queue, and the lane retires or waits at the top of the loop.
		d.releaseSlot(job, slot)
		d.giveBack(job)
		return true
	case flowNever:
		d.releaseSlot(job, slot)
		d.deadTooCostly(job, capacity)
		return true
	}
	if !reserved && d.reserve(ctx, 1) == 0 {
		d.releaseSlot(job, slot)
		d.giveBack(job)
		return false
	}
	if d.paused(job.Envelope.Tenant) {
		// Paused while it waited for room: it does not start.
		d.unreserve(1)
		d.releaseSlot(job, slot)
		d.giveBack(job)
		return true
	}
	if h, ok := d.cfg.Consumer.(queue.Holder); ok && (slot || !turnAt.IsZero()) && !h.Holds(job) {
		// Its partition is being let go (a rebalance) while it waited for
		// a slot or its turn: the next owner delivers it. (A job that
		// waited for neither was claimed just now.)
		d.unreserve(1)
		d.releaseSlot(job, slot)
		d.giveBack(job)
		return true
	}
	d.sentCounter(job.Envelope.Tenant).Add(job.Envelope.Cost)
	dispatches.Add(1)
	go func() {
		defer dispatches.Done()
		defer d.unreserve(1)
		d.dispatch(workCtx, job, o, slot, at)
	}()
	return true
}

// passGates takes job's concurrency slot and then its outflow turn
// (acquireSlot, waitTurn), answering as they do. A job the backend started
// with its claim (queue.Claimed.Started: it took its turn in that call, or
// its tenant had no gate then) passes at once with the tenant's current
// outflow, unless the tenant was removed meanwhile. at is the send time on
// the bucket's clock of a turn waitTurn took (zero: send now).
func (d *Drainer) passGates(ctx context.Context, job *queue.Claimed) (slot bool, f flow, capacity float64, o outflow.Limit, at time.Time) {
	if job.Started > 0 {
		o, ok := d.currentOutflow(job.Envelope.Tenant)
		if !ok {
			return false, flowRemoved, 0, o, at
		}
		return false, flowGo, 0, o, at
	}
	slot, f = d.acquireSlot(ctx, job)
	if f == flowGo {
		f, capacity, o, at = d.waitTurn(ctx, job)
	}
	return slot, f, capacity, o, at
}

// dropUnsent finishes a job that must not be sent: poison (dead-lettered),
// a copy of a job delivered already (queue.Claimed.Duplicate: settled with
// its state left done, counted in sluice_jobs_duplicate_skipped_total),
// cancelled, past its deadline, or a heartbeat job whose submitter stopped
// polling (dropped as expired, reason heartbeat, and counted). It reports
// whether the job was dealt with. Dropping spends no concurrency slot and no
// outflow turn. The deadline is read on the drainer's Clock; the heartbeat
// is compared at the backend's time the claim read it (Redis TIME,
// queue.Claimed.HeartbeatLapsed), at the head of the lane only: the queue is
// never scanned.
func (d *Drainer) dropUnsent(job *queue.Claimed, reserved bool) bool {
	env := job.Envelope
	lbl := d.label(env.Tenant)
	var out queue.Outcome
	switch {
	case job.DecodeErr != nil:
		out.Dead = &queue.DeadLetter{Reason: "poison", Error: job.DecodeErr.Error(), At: d.clock.Now().UTC()}
		d.m.dlq.WithLabelValues(lbl, "poison").Inc()
	case job.Duplicate:
		d.m.duplicates.WithLabelValues(lbl).Inc()
		out.Duplicate = true
	case job.Cancelled:
		d.m.dropped.WithLabelValues(lbl, "cancelled").Inc()
		out.Dropped = jobstate.Cancelled
	case env.Deadline != nil && d.clock.Now().After(*env.Deadline):
		d.m.dropped.WithLabelValues(lbl, "expired").Inc()
		out.Dropped = jobstate.Expired
	case job.HeartbeatLapsed():
		d.m.dropped.WithLabelValues(lbl, queue.ReasonHeartbeat).Inc()
		out.Dropped, out.Reason = jobstate.Expired, queue.ReasonHeartbeat
	default:
		return false
	}
	if reserved {
		d.unreserve(1)
	}
	d.settle(job, func(ctx context.Context) error { return d.cfg.Consumer.Finish(ctx, job, out) }, "finish")
	return true
}

// ReasonCostExceedsCapacity is the dead-letter reason of a job whose cost
// exceeds its tenant's outflow capacity (the configured one or the
// override the bucket script read): the bucket can never give it its turn,
// so it is dead-lettered at the head of its lane instead of holding the
// lane.
const ReasonCostExceedsCapacity = "cost_exceeds_capacity"

// deadTooCostly sends a job the outflow bucket can never pass to the
// dead-letter queue (flowNever), through the one Finish path every dead
// letter takes. It spends no outflow turn and no delivery attempt.
func (d *Drainer) deadTooCostly(job *queue.Claimed, capacity float64) {
	env := job.Envelope
	d.m.dlq.WithLabelValues(d.label(env.Tenant), ReasonCostExceedsCapacity).Inc()
	err := fmt.Errorf("cost %d exceeds the tenant's outflow capacity %v", env.Cost, capacity)
	d.log.Warn("drainer: job can never pass the outflow bucket; dead-lettered", "tenant", env.Tenant, "job_id", env.ID, "cost", env.Cost, "capacity", capacity)
	dead := d.deadLetter(ReasonCostExceedsCapacity, err, env.Attempt)
	d.settle(job, func(ctx context.Context) error { return d.cfg.Consumer.Finish(ctx, job, queue.Outcome{Dead: dead}) }, "finish")
}

// dispatch makes one delivery attempt and settles the job by its outcome.
// It first records the start (startDelivery), which finds a job cancelled
// after its claim, or done meanwhile by another copy: that one is dropped
// unsent. The Handler gets the envelope with Attempt set to the recorded
// starts before this one, so Sluice-Attempt counts every start; the
// envelope's own Attempt (attempts spent, for MaxAttempts and the backoff)
// is what a retry carries on.
func (d *Drainer) dispatch(ctx context.Context, job *queue.Claimed, o outflow.Limit, slot bool, at time.Time) {
	d.m.inflight.Inc()
	defer d.m.inflight.Dec()
	defer d.releaseSlot(job, slot)
	env := job.Envelope
	lbl := d.label(env.Tenant)
	st, recorded := d.startDelivery(ctx, job)
	if !recorded {
		d.giveBackUnstarted(ctx, job)
		return
	}
	if !st.Deliver {
		d.dropAtStart(job, st.Duplicate)
		return
	}
	sent := env
	sent.Attempt = max(st.Attempt-1, env.Attempt)
	err := d.handle(ctx, sent, lbl, at)
	out, overload := classify(err, ctx.Err() != nil)
	if overload && o.Adaptive {
		d.decrease(env.Tenant, o)
	}
	c := d.cfg.Consumer
	switch out {
	case outDone:
		d.m.dispatch.WithLabelValues(lbl, "done").Inc()
		d.settle(job, func(ctx context.Context) error { return c.Finish(ctx, job, queue.Outcome{}) }, "finish")
	case outRetryAfter:
		d.deferAsAsked(job, sent.Attempt+1, lbl, err)
	case outRetry:
		next := env
		next.Attempt++
		if next.Attempt >= d.cfg.Settings.MaxAttempts {
			d.fails.failed(env.Tenant, env.ID, sent.Attempt+1, "dead", err)
			d.m.dispatch.WithLabelValues(lbl, "dead").Inc()
			d.m.dlq.WithLabelValues(lbl, "attempts_exhausted").Inc()
			dead := d.deadLetter("attempts_exhausted", err, next.Attempt)
			d.settle(job, func(ctx context.Context) error { return c.Finish(ctx, job, queue.Outcome{Dead: dead}) }, "finish")
			return
		}
		d.fails.failed(env.Tenant, env.ID, sent.Attempt+1, "retry", err)
		d.m.dispatch.WithLabelValues(lbl, "retry").Inc()
		d.m.retries.WithLabelValues(lbl, "backoff").Inc()
		r := queue.Retry{Delay: d.backoff.next(next.Attempt), Next: next, LastError: err.Error()}
		d.settle(job, func(ctx context.Context) error { return c.Defer(ctx, job, r) }, "defer")
	case outDead:
		d.fails.failed(env.Tenant, env.ID, sent.Attempt+1, "dead", err)
		d.m.dispatch.WithLabelValues(lbl, "dead").Inc()
		d.m.dlq.WithLabelValues(lbl, "rejected").Inc()
		dead := d.deadLetter("rejected", err, env.Attempt+1)
		d.settle(job, func(ctx context.Context) error { return c.Finish(ctx, job, queue.Outcome{Dead: dead}) }, "finish")
	case outStopped:
		d.m.dispatch.WithLabelValues(lbl, "stopped").Inc()
		d.settle(job, func(ctx context.Context) error { return c.Release(ctx, job) }, "release")
	}
}

// handle hands env to the Handler, first holding it until its send time
// on the bucket's clock (at, zero: none; waitSend, a late one counted), and
// observes the delivery's duration.
func (d *Drainer) handle(ctx context.Context, env queue.Envelope, lbl string, at time.Time) error {
	if waitSend(ctx, at) {
		d.m.lateSends.Inc()
	}
	start := d.clock.Now()
	err := d.handler.Handle(ctx, env)
	d.m.duration.WithLabelValues(lbl).Observe(d.clock.Now().Sub(start).Seconds())
	return err
}

// dropAtStart finishes a job whose start found it cancelled after its claim
// (while it waited for its turn), or done already by another copy
// (duplicate), unsent; each is counted.
func (d *Drainer) dropAtStart(job *queue.Claimed, duplicate bool) {
	lbl := d.label(job.Envelope.Tenant)
	out := queue.Outcome{Dropped: jobstate.Cancelled}
	if duplicate {
		d.m.duplicates.WithLabelValues(lbl).Inc()
		out = queue.Outcome{Duplicate: true}
	} else {
		d.m.dropped.WithLabelValues(lbl, "cancelled").Inc()
	}
	d.settle(job, func(ctx context.Context) error { return d.cfg.Consumer.Finish(ctx, job, out) }, "finish")
}

// deadLetter builds the dead-letter record of a job's last error, dated by
// the drainer's Clock.
func (d *Drainer) deadLetter(reason string, err error, attempts int) *queue.DeadLetter {
	dl := &queue.DeadLetter{Reason: reason, Attempts: attempts, At: d.clock.Now().UTC()}
	if err != nil {
		dl.Error = err.Error()
	}
	var pe *PermanentError
	var se *StatusError
	switch {
	case errors.As(err, &pe):
		dl.Status, dl.Response = pe.Status, pe.Body
	case errors.As(err, &se):
		dl.Status, dl.Response = se.Status, se.Body
	}
	return dl
}
