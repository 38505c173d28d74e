package kafkaq

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// TakeTurn is Take for a tenant whose outflow is shaped (rate units/s,
// capacity units; both > 0): it takes at most one job, as Take does (with
// none it waits up to ClaimWait and returns nil and a zero Turn), and in
// the same Redis call starts it only when the tenant's shared bucket
// (keys.Water, with the override and the adaptive rate as outflow.Bucket
// reads them) gives it its turn for the envelope's cost. When the turn is
// not free the job goes back to the head of its FIFO, as Release puts it
// (no Redis), and the next take finds it first: TakeTurn returns no job
// and turn.Wait > 0. A turn due within ahead (at most queue.TurnAheadMax)
// is granted now with the job's SendDelay, the time to wait before its
// send. It takes one job whatever k asks (each Kafka take is its own
// bucket call). A job
// Take would not start (poison, cancelled, a done copy, with a deadline or
// a heartbeat, a second copy held now), or whose cost exceeds the capacity,
// comes unstarted and has taken no turn. When Redis fails, or answers
// something else, the job comes unstarted, counted as Take counts it; when
// the script refuses a number (a rate or capacity it cannot represent, the
// tenant's override) the job goes back and the error is returned. It
// implements queue.TurnTaker.
func (c *Consumer) TakeTurn(ctx context.Context, tenant string, _ int, rate, capacity float64, ahead time.Duration) ([]*queue.Claimed, queue.Turn, time.Duration, error) {
	if err := queue.CheckTurn(tenant, rate, capacity, ahead); err != nil {
		return nil, queue.Turn{}, 0, err
	}
	jobs := c.popTaken(ctx, tenant, 1)
	if len(jobs) == 0 {
		return nil, queue.Turn{}, 0, nil
	}
	turn, err := c.startTaken(ctx, tenant, jobs, turnGate{Rate: rate, Capacity: capacity, Ahead: ahead})
	if err == nil && turn.Wait <= 0 {
		return jobs, turn, 0, nil
	}
	c.putBack(jobs[0])
	if err != nil {
		return nil, queue.Turn{}, 0, fmt.Errorf("queue: take %s: %w", tenant, err)
	}
	return nil, turn, 0, nil
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
