package drainer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/outflow"
	"github.com/sluicehq/sluice/queue"
)

// turnAhead is how far ahead a shaped tenant's take may grant a turn
// (queue.TurnTaker): the job is held that long before its send, so a lane
// asks about once per job at rates above 1/turnAhead instead of twice.
const turnAhead = 100 * time.Millisecond

// turnLead is how long before a refused turn falls due its lane asks again:
// inside turnAhead, so the ask is granted for a send at the turn's own time
// and the ask's latency (the lane's wake-up, the round trip, a busy Redis)
// is not lost. Asked once the turn is free instead, every late ask delays
// the turn and all after it: a tenant at 1 job/s whose asks are 20 ms late
// drains 2 % under its rate.
const turnLead = turnAhead / 2

// turnSleep is a lane's sleep after the bucket answered wait for its next
// turn: until turnLead before the turn, clamped to [outflowWaitMin,
// outflowWaitMax].
func turnSleep(wait time.Duration) time.Duration {
	return min(max(wait-turnLead, outflowWaitMin), outflowWaitMax)
}

// turnsAhead bounds the jobs a shaped tenant's take asks for, and so the
// places it reserves while on the wire: the turns of cost 1 its bucket can
// grant within turnAhead, capacity + rate × turnAhead (1 for a tenant at 1
// job/s with capacity 1, where takeBatch would reserve 2), at least 1 and
// at most takeMax. A capacity raised by an override only takes more calls.
func turnsAhead(o outflow.Limit) int {
	n := min(o.Capacity+o.Rate*turnAhead.Seconds(), takeMax)
	if !(n >= 1) { // below 1, or not a number
		return 1
	}
	return int(n)
}

// takeMax bounds the jobs one pull loop takes in one call (queue.Taker), so
// a lane holds at most laneClaimers × takeMax of MaxInFlight's room while
// its take is on the wire.
const takeMax = 16

// taker returns the consumer's queue.Taker when the tenant's outflow has no
// gate in Redis now (no rate, no concurrency cap): only then may a claim
// also record the delivery start, since a started job has taken no turn
// and no slot. A removed tenant gets none (the claim path finds it so).
func (d *Drainer) taker(tenant string) (queue.Taker, bool) {
	t, ok := d.cfg.Consumer.(queue.Taker)
	if !ok {
		return nil, false
	}
	o, ok := d.currentOutflow(tenant)
	if !ok || o.Shaped() || o.Concurrency > 0 {
		return nil, false
	}
	return t, true
}

// turnTaker returns the consumer's queue.TurnTaker and the tenant's outflow
// when the tenant is shaped and has no concurrency cap now: then a claim
// also takes the job's turn from the shared bucket and records its start.
func (d *Drainer) turnTaker(tenant string) (queue.TurnTaker, outflow.Limit, bool) {
	t, ok := d.cfg.Consumer.(queue.TurnTaker)
	if !ok {
		return nil, outflow.Limit{}, false
	}
	o, ok := d.currentOutflow(tenant)
	if !ok || !o.Shaped() || o.Concurrency > 0 {
		return nil, outflow.Limit{}, false
	}
	return t, o, true
}

// reserve takes room for min(n, MaxInFlight) dispatches, all at once
// (room.acquire: waiting until that many are free, first come first
// served). It returns how many it took, 0 when ctx ended first.
func (d *Drainer) reserve(ctx context.Context, n int) int { return d.room.acquire(ctx, n) }

// unreserve gives back n places reserve took.
func (d *Drainer) unreserve(n int) { d.room.release(n) }

// takeBatch is how many jobs a lane's next take asks for, and so how many
// places it reserves: takeMax while its takes come back full, else one more
// than the last one got, doubling again as they fill. A tenant with a job
// now and then thus waits, in a full drainer, for one place to come free
// and not for takeMax (reserve grants whole batches in arrival order).
// Shared by a lane's pull loops.
type takeBatch struct{ n atomic.Int32 }

func (b *takeBatch) size() int {
	if n := b.n.Load(); n > 0 {
		return int(n)
	}
	return takeMax
}

// took records a take that asked for asked jobs and got got.
func (b *takeBatch) took(asked, got int) {
	if got >= asked {
		b.n.Store(int32(min(takeMax, 2*asked)))
	} else {
		b.n.Store(int32(max(1, got+1)))
	}
}

// take is claimAndLaunch through a queue.Taker: it reserves room among
// MaxInFlight for up to takeMax jobs first (so a job it starts never waits
// for room with its start recorded), takes that many in one call, gives the
// unused room back and hands each job to launch with its place: a started
// one (Claimed.Started) goes to its dispatch at once, the others take the
// claim path's steps (dropped unsent, or started by dispatch). A tenant
// paused while the room was reserved takes nothing. A consumer whose Take
// waits for jobs (queue.JobWaiter: Kafka's) is waited on first, holding no
// room, so idle lanes never take room from busy ones.
func (d *Drainer) take(ctx, workCtx context.Context, tenant string, t queue.Taker, dispatches *sync.WaitGroup, w *laneWake, b *takeBatch) (got bool, wait time.Duration, live bool, err error) {
	if jw, ok := t.(queue.JobWaiter); ok && !jw.WaitJobs(ctx, tenant) {
		return false, 0, ctx.Err() == nil, nil
	}
	room := d.reserve(ctx, b.size())
	if room == 0 {
		return false, 0, false, nil
	}
	if d.paused(tenant) {
		d.unreserve(room)
		return false, 0, true, nil
	}
	jobs, wait, err := t.Take(ctx, tenant, room)
	d.unreserve(room - len(jobs))
	if err == nil {
		b.took(room, len(jobs))
	}
	if err != nil || len(jobs) == 0 {
		return false, wait, true, err
	}
	w.wake()
	for _, job := range jobs {
		d.held.add(tenant, job)
	}
	live = true
	for _, job := range jobs {
		switch {
		case !live:
			// ctx ended while an earlier job waited: the rest go back.
			d.unreserve(1)
			d.giveBack(job)
		case d.dropUnsent(job, true):
		default:
			live = d.launch(ctx, workCtx, job, dispatches, true, time.Time{})
		}
	}
	return true, 0, live, nil
}

// takeTurn is claimAndLaunch through a queue.TurnTaker for a shaped tenant:
// it reserves room for up to takeMax dispatches (takeBatch's size, as take
// does), asks the backend for that many head jobs with their outflow turns
// (one call grants every turn due within turnAhead, on both backends),
// gives the unused room back and launches the jobs (launchTurns). When the
// bucket has no turn free it sleeps until turnLead before the turn
// (turnSleep, cut short by a configuration change, as waitTurn's) and
// reports got, so the pull loop asks again at once and is granted the turn
// ahead, for a send at its time. After a grant whose answer tells the next
// turn (Turn.Next) it sleeps the same way, from the answer, so no ask is
// made only to be refused. A consumer whose take
// waits for jobs (queue.JobWaiter) is waited on first, holding no room.
// The bucket gauges are set from every answer, and
// sluice_outflow_wait_seconds observes, per job, the time from the first
// refused ask to its send (the job waits at the head of the queue
// meanwhile, then for its turn granted ahead).
func (d *Drainer) takeTurn(ctx, workCtx context.Context, tenant string, t queue.TurnTaker, o outflow.Limit, dispatches *sync.WaitGroup, w *laneWake, b *takeBatch) (got bool, wait time.Duration, live bool, err error) {
	changed := d.tenantsChanged()
	if jw, ok := t.(queue.JobWaiter); ok && !jw.WaitJobs(ctx, tenant) {
		return false, 0, ctx.Err() == nil, nil
	}
	room := d.reserve(ctx, min(b.size(), turnsAhead(o)))
	if room == 0 {
		return false, 0, false, nil
	}
	if d.paused(tenant) {
		d.unreserve(room)
		return false, 0, true, nil
	}
	jobs, turn, wait, err := t.TakeTurn(ctx, tenant, room, o.Rate, o.Capacity, turnAhead)
	answered := time.Now()
	d.sends.observe(answered, turn.At) // zero on an error: nothing learnt
	d.unreserve(room - len(jobs))
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) && strings.Contains(re.Error(), "take: ") {
			err = &gateError{err} // the bucket's part of the script refused a number
		}
		return false, 0, true, err
	}
	if turn.Rate > 0 {
		d.setBucketGauges(tenant, turn.Water, turn.Rate, o.Rate)
	}
	if turn.Wait > 0 {
		d.refused.LoadOrStore(tenant, d.clock.Now())
		return true, 0, sleepOrChange(ctx, turnSleep(turn.Wait), changed), nil
	}
	b.took(room, len(jobs))
	if len(jobs) == 0 {
		return false, wait, true, nil
	}
	var waited time.Duration
	if since, ok := d.refused.LoadAndDelete(tenant); ok {
		waited = d.clock.Now().Sub(since.(time.Time))
	}
	w.wake()
	for _, job := range jobs {
		d.held.add(tenant, job)
		d.m.outflowWaits.Observe((waited + job.SendDelay).Seconds())
		if job.SendDelay > 0 {
			d.unreserve(1) // taken again at its send (launchTurns)
		}
	}
	live = d.launchTurns(ctx, workCtx, jobs, answered, turn.At, dispatches)
	if turn.Next > 0 && live {
		// The next turn is Next away: asked now it would be refused, so the
		// lane sleeps as after a refusal, and its next job waits from here.
		d.refused.LoadOrStore(tenant, d.clock.Now())
		live = sleepOrChange(ctx, time.Until(answered.Add(turnSleep(turn.Next))), changed)
	}
	return true, 0, live, nil
}

// launchTurns launches the jobs of one takeTurn in their order, each when
// its SendDelay after the answer (at) has passed, and its dispatch sends it
// at its turn on the bucket's clock (bucketAt + SendDelay, mapped by
// sendClock: at most sendMargin later; zero bucketAt: at once). A job whose turn is free
// now holds the place the take reserved for it; one granted ahead gave its
// place back at the answer (takeTurn) and takes one again at its send,
// ahead of any take waiting for room (room.acquireFront), so
// the turns held ahead by many slow tenants (2,000 at 1 job/s: about 100 at
// a time) do not fill MaxInFlight and keep other lanes' asks waiting for
// room past their turns. A job the take did not start (a deadline or
// heartbeat to check, no recorded cost) asks the bucket itself, holding no
// room meanwhile. When ctx ends while a job waits, it and the rest go back
// (their turns are spent; they are taken again) and launchTurns reports
// false.
func (d *Drainer) launchTurns(ctx, workCtx context.Context, jobs []*queue.Claimed, at, bucketAt time.Time, dispatches *sync.WaitGroup) bool {
	sendBase := d.sends.sendAt(bucketAt, 0) // one lock per answer, not per job
	live := true
	for _, job := range jobs {
		placed := job.SendDelay == 0
		if live && !placed {
			live = sleep(ctx, time.Until(at.Add(job.SendDelay))) && d.room.acquireFront(ctx)
			placed = live
		}
		switch {
		case !live:
			if placed {
				d.unreserve(1)
			}
			d.giveBack(job)
		case d.dropUnsent(job, true):
		case job.Started == 0:
			d.unreserve(1)
			live = d.launch(ctx, workCtx, job, dispatches, false, time.Time{})
		default:
			live = d.launch(ctx, workCtx, job, dispatches, true, later(sendBase, job.SendDelay))
		}
	}
	return live
}

// gateError is a take the backend's script refused for the outflow bucket's
// sake (a rate, capacity or override it cannot represent): counted as an
// outflow error, not a claim error.
type gateError struct{ err error }

func (e *gateError) Error() string { return "outflow bucket: " + e.err.Error() }
func (e *gateError) Unwrap() error { return e.err }

// errOp is the sluice_drainer_errors_total op of a failed claim or take.
func errOp(err error) string {
	var ge *gateError
	if errors.As(err, &ge) {
		return "outflow"
	}
	return "claim"
}

// giveBack releases a job that was not sent (the lane stops, or the tenant
// was paused or removed before its dispatch): through queue.Untaker when the
// take started it, so its recorded start is undone, else Release.
func (d *Drainer) giveBack(job *queue.Claimed) {
	if job.Counted {
		// The take counted its units in the outflow of its send's second:
		// the next flush takes them back.
		d.units.adjust(job.Envelope.Tenant, job.CountedAt, -max(job.Envelope.Cost, 1))
	}
	if u, ok := d.cfg.Consumer.(queue.Untaker); ok && job.Started > 0 {
		d.settle(job, func(ctx context.Context) error { return u.Untake(ctx, job) }, "release")
		return
	}
	d.settle(job, func(ctx context.Context) error { return d.cfg.Consumer.Release(ctx, job) }, "release")
}
