package kafkaq

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// A finish whose Redis write (lowerBacklog: the backlog counter, the job's
// final state, a dead job's DLQ listing) fails, with Redis down, is not
// dropped: the job stays claimed, its offset unfinished (so the watermark
// and the commit wait at it, and a revoke waits for it as for a delivery
// still running), and the write is sent again every finishRetry until
// Redis answers it; then the offset finishes as it would have. A write
// that got no reply (lua.NoReply: no connection, or one that failed or
// timed out before the reply, so the write may have run or not) is held
// and sent again: kafka_finish.lua marks each job it finishes with the
// record's identity (fin: topic/partition@offset) and lowers nothing for a
// record so marked, so a write that had run lowers the counter once
// however often it is sent. An error reply
// repeats, so holding it would hold the offset for good: that job
// finishes as before. Before this a
// Redis outage left every job finished during it reading queued, its cost
// in the backlog (so max_backlog refused the tenant for the counter's
// TTL), and each dead job out of the DLQ listing. The Finish call itself
// returns at once (nil): the delivery is over, and the drainer goes on.
// A partition revoked meanwhile drops its held finishes: the next owner
// hands the job out again (at least once).

// finishRetry is how often held finish writes are sent again: the
// producer's post-ack retry period.
const finishRetry = backlogRetry

// quietEvery bounds the log lines of failures that repeat per job while
// Redis is down: one per tenant per quietEvery, the rest counted.
const quietEvery = 10 * time.Second

// heldFinish is a finish whose Redis write has not landed.
type heldFinish struct {
	job *queue.Claimed
	e   *entry
	out queue.Outcome
}

// holdFinish keeps the claimed job's finish for retryFinishes, or returns
// queue.ErrLeaseLost when its partition was revoked meanwhile.
func (c *Consumer) holdFinish(job *queue.Claimed, e *entry, out queue.Outcome) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.claimed[job] == nil || e.fifo.p.state == partRevoked {
		c.takeLocked(job)
		return fmt.Errorf("queue: finish %s: %w", job.Envelope.ID, queue.ErrLeaseLost)
	}
	c.unwritten = append(c.unwritten, heldFinish{job: job, e: e, out: out})
	c.m.heldFinishes.Set(float64(len(c.unwritten)))
	return nil
}

// retryFinishes sends the held finish writes again every finishRetry until
// ctx ends, finishing each job whose write lands and dropping those of a
// revoked partition.
func (c *Consumer) retryFinishes(ctx context.Context) {
	t := time.NewTicker(finishRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		held := append([]heldFinish(nil), c.unwritten...)
		c.mu.Unlock()
		settled := map[*queue.Claimed]bool{}
		for _, h := range held {
			if ctx.Err() != nil {
				break // Run is returning: the rest are redelivered (at least once)
			}
			c.mu.Lock()
			gone := c.claimed[h.job] == nil || h.e.fifo.p.state == partRevoked
			if gone {
				c.takeLocked(h.job)
			}
			c.mu.Unlock()
			if !gone {
				if err := c.lowerBacklog(ctx, h.job, h.out); lua.NoReply(err) {
					continue // still no reply
				}
				_ = c.finishClaimed(h.job, h.e) // a revoke meanwhile: the next owner has it
			}
			settled[h.job] = true
		}
		c.mu.Lock()
		left := c.unwritten[:0]
		for _, h := range c.unwritten {
			if !settled[h.job] {
				left = append(left, h)
			}
		}
		c.unwritten = left
		c.m.heldFinishes.Set(float64(len(c.unwritten)))
		c.mu.Unlock()
	}
}
