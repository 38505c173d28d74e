package drainer

import (
	"context"
	"sync"
	"time"
)

// This file holds how a lane's pull loops idle: how many a lane runs, how
// the first backs its polling off while the queue stays empty, and how the
// others park until it claims a job.

// laneClaimers is how many pull loops a lane runs while its tenant has no
// outflow limit. A loop that takes (queue.Taker) gets up to takeMax jobs per
// round trip, so two loops, overlapping their round trips, keep a lane
// busy; more only split MaxInFlight's room into smaller takes when many
// lanes are busy (4 loops: 12 tenants drained at 0.75-0.80x the rate of 1
// in drainbench; 2 loops: 0.82-1.03x, 2026-12-01). A loop that claims one
// job per round trip (a capped tenant, a consumer without Taker) is bounded
// at 1 / claim RTT, a few thousand jobs/s on loopback. A
// tenant with a rate keeps one loop: extra loops would only poll its
// bucket (or its concurrency semaphore), each holding a job. While the
// tenant's queue is empty only the first loop polls: an extra loop whose
// claim finds nothing parks until a loop of its lane claims a job
// (laneWake), so an idle lane costs one poll, not laneClaimers.
const laneClaimers = 2

// idlePollMax caps the pause of a lane's polling loop while its queue stays
// empty: the pause the consumer answers (the poll interval, or the time
// until a retry falls due) doubles with each empty claim up to
// max(answer, idlePollMax), and is the answer again from the first job.
// An idle Redis-backend lane thus claims about once a second after 1.5 s
// of quiet, and a job pushed to an idle lane is claimed within
// idlePollMax (plus one claim). A consumer that waits itself and answers 0
// (Kafka's, after ClaimWait) is asked again at once, as before.
const idlePollMax = time.Second

// idlePoll is the pause after the n-th empty claim in a row (n ≥ 1) whose
// answer was wait.
func idlePoll(wait time.Duration, n int) time.Duration {
	if wait <= 0 {
		return 0
	}
	top := max(wait, idlePollMax)
	d := wait
	for i := 1; i < n && d < top; i++ {
		d *= 2
	}
	return min(d, top)
}

// laneWake lets the parked extra loops of a lane wait for a claimed job.
type laneWake struct {
	mu sync.Mutex
	ch chan struct{} // closed by wake; nil until a loop waits
}

// wait returns a channel closed at the next wake. A loop takes it before
// its claim, so a job claimed meanwhile by another loop is not missed.
func (w *laneWake) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// wake releases every loop parked on wait's channel.
func (w *laneWake) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// idleBackoff is the first pull loop's pause while its tenant's queue stays
// empty; the zero value is the state after a claimed job.
type idleBackoff struct {
	empty int           // empty claims in a row
	last  time.Duration // the consumer's last answer to an empty claim
	since time.Time     // when the first of them answered
}

// emptyFor is how long the claims have found the queue empty in a row.
func (b *idleBackoff) emptyFor() time.Duration {
	if b.since.IsZero() {
		return 0
	}
	return time.Since(b.since)
}

// next returns the pause after an empty claim the consumer answered with
// wait: idlePoll of the run of empty claims, at least claimWaitMin.
func (b *idleBackoff) next(wait time.Duration) time.Duration {
	// A shorter answer than the last one is a retry falling due: honour it
	// at once.
	if wait < b.last {
		b.empty = 0
	}
	if b.since.IsZero() {
		b.since = time.Now()
	}
	b.empty++
	b.last = wait
	// A wait of 0 (the Kafka consumer's, after its own ClaimWait) still
	// sleeps claimWaitMin, so no answer makes the loop spin.
	return max(idlePoll(wait, b.empty), claimWaitMin)
}

// park holds an extra pull loop whose claim found nothing until woken
// closes (a loop of its lane claimed a job) or ctx is done, looking every
// discoverEvery whether its tenant was removed. It claims nothing
// meanwhile.
func (d *Drainer) park(ctx context.Context, woken <-chan struct{}, stop func() bool) {
	t := time.NewTicker(discoverEvery)
	defer t.Stop()
	for {
		select {
		case <-woken:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			if stop() {
				return
			}
		}
	}
}

// sleepOrChange waits d, or until ctx is done or changed closes (the
// tenants were replaced); it reports whether ctx is still live.
func sleepOrChange(ctx context.Context, d time.Duration, changed <-chan struct{}) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-t.C:
	}
	return ctx.Err() == nil
}

// sleep waits d or until ctx is done; it reports whether ctx is still live
// (the full d passed).
func sleep(ctx context.Context, d time.Duration) bool { return sleepOrChange(ctx, d, nil) }
