package redisq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/internal/metrics"
)

// DefaultWaitTimeout is Wait.Timeout's default (redis.wait_timeout).
const DefaultWaitTimeout = 100 * time.Millisecond

// Wait makes an enqueue wait for replicas (Redis WAIT) before it counts as
// durable: a 202 then survives a failover to one of those replicas, which a
// write the primary had not yet streamed does not (asynchronous
// replication loses the last writes of a primary that dies).
//
// WAIT goes last in the pipeline of the enqueue scripts, on the same
// connection, so it covers their writes and costs no extra round trip; it
// returns how many replicas acknowledged them within Timeout. Fewer than
// Replicas fails every tenant of that pipeline whose script succeeded with
// an error wrapping queue.ErrUnavailable and queue.ErrUnknownOutcome: the
// jobs are on the primary and will be delivered unless the primary dies
// before its replicas catch up, so a retry with the same client id must
// find the same job (ingest's idempotency). WAIT does not make a write
// durable on the replica's disk, only in its memory (its AOF fsyncs every
// second, as the primary's).
//
// Only the enqueue waits. A drainer's acks, retries and state writes do
// not: one lost in a failover makes the job (or its retry) run again from
// the replica's older state, a redelivery that at-least-once delivery
// allows, not a loss. The Kafka backend's state writes do not either:
// there Kafka holds the job durably and Redis only its state and backlog
// counter.
type Wait struct {
	// Replicas is how many replicas must acknowledge; 0 (the default) does
	// not wait.
	Replicas int
	// Timeout bounds the WAIT (default DefaultWaitTimeout). It must stay
	// below the client's read timeout, which bounds the pipeline.
	Timeout time.Duration
}

// errWaitShort marks an enqueue whose WAIT saw too few replicas.
var errWaitShort = errors.New("redisq: fewer replicas acknowledged the enqueue than redis.wait_replicas")

// withDefaults returns w with Timeout filled in.
func (w Wait) withDefaults() Wait {
	if w.Timeout <= 0 {
		w.Timeout = DefaultWaitTimeout
	}
	return w
}

// queue queues WAIT on p and returns its command.
func (w Wait) queue(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	return p.Do(ctx, "WAIT", w.Replicas, w.Timeout.Milliseconds())
}

// check turns the WAIT's reply into the error of every batch whose script
// succeeded (errs[i] == nil): nil when enough replicas acknowledged.
func (w Wait) check(cmd *redis.Cmd, errs []error) {
	n, err := cmd.Int64()
	switch {
	case err != nil:
		err = fmt.Errorf("%w: WAIT %d %d: %w: %w", errWaitShort, w.Replicas, w.Timeout.Milliseconds(), queue.ErrUnknownOutcome, err)
	case n < int64(w.Replicas):
		err = fmt.Errorf("%w: WAIT %d %d answered %d: %w", errWaitShort, w.Replicas, w.Timeout.Milliseconds(), n, queue.ErrUnknownOutcome)
	default:
		return
	}
	for i := range errs {
		if errs[i] == nil {
			errs[i] = err
		}
	}
}

// waitShortCounter registers (or finds) sluice_redis_wait_short_total.
func waitShortCounter(reg prometheus.Registerer) (prometheus.Counter, error) {
	return metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_redis_wait_short_total",
		Help: "Redis-backend Enqueue calls answered with an error because WAIT saw fewer replicas than redis.wait_replicas within redis.wait_timeout (the jobs are on the primary; outcome unknown).",
	}))
}

// waitShort reports whether one of errs is a WAIT shortfall.
func waitShort(errs []error) bool {
	for _, err := range errs {
		if errors.Is(err, errWaitShort) {
			return true
		}
	}
	return false
}
