package kafkaq

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// TakeTurn is Take for a tenant whose outflow is shaped (rate units/s,
// capacity units; both > 0): it takes up to k jobs (clamped to [1,
// TakeMax]) as Take does (with none it waits up to ClaimWait and returns nil
// and a zero Turn), and in the same Redis call starts them, in order, only
// as the tenant's shared bucket (keys.Water, with the override and the
// adaptive rate as outflow.Bucket reads them) gives each its turn for the
// envelope's cost. A turn due within ahead (at most queue.TurnAheadMax) is
// granted now with the job's SendDelay, the time to wait before its send,
// so one call takes every turn due within ahead (as the Redis backend's
// take; lever L15). One call carries the first job and the jobs after it
// that are startable too and of its cost (gatedBatch); the others go back
// to the head of their FIFO at once, as do the jobs after the first whose
// turn falls later. When the first job's turn is not free every job goes
// back, as Release puts it (no Redis), and the next take finds it first:
// TakeTurn returns no job and turn.Wait > 0. A job Take would not start
// (poison, cancelled, a done copy, with a deadline or a heartbeat, a second
// copy held now), or whose cost exceeds the capacity, comes unstarted
// (alone, when first) and has taken no turn. When Redis fails, or answers
// something else, the call's jobs come unstarted, counted as Take counts
// it; when the script refuses a number (a rate or capacity it cannot
// represent, the tenant's override) the jobs go back and the error is
// returned. It implements queue.TurnTaker.
func (c *Consumer) TakeTurn(ctx context.Context, tenant string, k int, rate, capacity float64, ahead time.Duration) ([]*queue.Claimed, queue.Turn, time.Duration, error) {
	if err := queue.CheckTurn(tenant, rate, capacity, ahead); err != nil {
		return nil, queue.Turn{}, 0, err
	}
	jobs := c.popTaken(ctx, tenant, min(max(k, 1), TakeMax))
	if len(jobs) == 0 {
		return nil, queue.Turn{}, 0, nil
	}
	batch := gatedBatch(jobs)
	c.putBackAll(jobs[len(batch):])
	turn, covered, err := c.startTaken(ctx, tenant, batch, turnGate{Rate: rate, Capacity: capacity, Ahead: ahead})
	if err != nil || turn.Wait > 0 {
		c.putBackAll(batch)
		if err != nil {
			return nil, queue.Turn{}, 0, fmt.Errorf("queue: take %s: %w", tenant, err)
		}
		return nil, turn, 0, nil
	}
	c.putBackAll(batch[covered:])
	return batch[:covered], turn, 0, nil
}

// gatedBatch is the jobs of jobs one gated kafka_take.lua call carries: the
// first, and while the first is startable, the startable jobs after it of
// its cost (the script's bucket pass is for one cost).
func gatedBatch(jobs []*queue.Claimed) []*queue.Claimed {
	n := 1
	for n < len(jobs) && startable(jobs[0]) && startable(jobs[n]) && jobs[n].Envelope.Cost == jobs[0].Envelope.Cost {
		n++
	}
	return jobs[:n]
}

// putBackAll puts jobs back (putBack), the last first, so they are at the
// head of their FIFOs in their order and the round robin points at the
// first one's.
func (c *Consumer) putBackAll(jobs []*queue.Claimed) {
	for i := len(jobs) - 1; i >= 0; i-- {
		c.putBack(jobs[i])
	}
}

// putBack returns a job TakeTurn took but does not hand out to the head of
// its FIFO (releaseLocked) and points its tenant's round robin at that
// FIFO, so the next take finds the same job first.
func (c *Consumer) putBack(job *queue.Claimed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.releaseLocked(job)
	if e == nil {
		return
	}
	tq := e.fifo.tq
	for i, f := range tq.fifos {
		if f == e.fifo {
			tq.rr = i
			break
		}
	}
}

var _ queue.TurnTaker = (*Consumer)(nil)
