package drainer

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/queue"
)

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

// reserve takes room for up to n dispatches among MaxInFlight: it waits for
// the first and takes the others only when they are free at once. It
// returns how many it took, 0 when ctx ended first.
func (d *Drainer) reserve(ctx context.Context, n int) int {
	select {
	case d.inFlight <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	got := 1
	for got < n {
		select {
		case d.inFlight <- struct{}{}:
			got++
		default:
			return got
		}
	}
	return got
}

// unreserve gives back n places reserve took.
func (d *Drainer) unreserve(n int) {
	for range n {
		<-d.inFlight
	}
}

// take is claimAndLaunch through a queue.Taker: it reserves room among
// MaxInFlight for up to takeMax jobs first (so a job it starts never waits
// for room with its start recorded), takes that many in one call, gives the
// unused room back and hands each job to launch with its place: a started
// one (Claimed.Started) goes to its dispatch at once, the others take the
// claim path's steps (dropped unsent, or started by dispatch). A tenant
// paused while the room was reserved takes nothing.
func (d *Drainer) take(ctx, workCtx context.Context, tenant string, t queue.Taker, dispatches *sync.WaitGroup, w *laneWake) (got bool, wait time.Duration, live bool, err error) {
	room := d.reserve(ctx, takeMax)
	if room == 0 {
		return false, 0, false, nil
	}
	if d.paused(tenant) {
		d.unreserve(room)
		return false, 0, true, nil
	}
	jobs, wait, err := t.Take(ctx, tenant, room)
	d.unreserve(room - len(jobs))
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
			d.settle(job, func(ctx context.Context) error { return d.cfg.Consumer.Release(ctx, job) }, "release")
		case d.dropUnsent(job, true):
		default:
			live = d.launch(ctx, workCtx, job, dispatches, true)
		}
	}
	return true, 0, live, nil
}
