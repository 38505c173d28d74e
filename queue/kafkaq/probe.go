package kafkaq

import (
	"context"
	"time"
)

// Probe reports which of tenants have a job in memory to hand out now (a
// FIFO head) or a deferred retry due within within; expired is always nil
// (a Kafka lease lives in this process). It reads only this consumer's
// memory (no Redis, no broker) and implements queue.Prober.
func (c *Consumer) Probe(_ context.Context, tenants []string, within time.Duration) (ready, expired []string, err error) {
	due := c.clock.Now().Add(within)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range tenants {
		if tq, ok := c.tenants[t]; ok && tq.readyBy(due) {
			ready = append(ready, t)
		}
	}
	return ready, nil, nil
}

// readyBy reports whether tq has a FIFO head, or a deferred retry due by
// due. The caller holds c.mu.
func (tq *tenantQueue) readyBy(due time.Time) bool {
	if len(tq.deferred) > 0 && !tq.deferred[0].due.After(due) {
		return true
	}
	for _, f := range tq.fifos {
		if f.q.len() > 0 {
			return true
		}
	}
	return false
}
