package redisq

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/internal/metrics"
)

// This file holds the Producer's replica wait (ProducerConfig.Wait,
// lua.Wait). WAIT goes last in the pipeline of the enqueue scripts, on
// their connection (lua.ExecWait): no extra round trip. Fewer replicas
// than asked fails every tenant of that pipeline whose script succeeded
// with an error wrapping queue.ErrUnavailable and queue.ErrUnknownOutcome:
// the jobs are on the primary and will be delivered unless the primary
// dies before its replicas catch up, so a retry with the same client id
// must find the same job (ingest's idempotency).
//
// Only what makes a 202 waits: this enqueue, and ingest's store of
// scheduled jobs (internal/scheduler.AddWait). A drainer's claims, acks,
// retries and state writes do not: one lost in a failover makes the job
// (or its retry) run again from the replica's older state, a redelivery
// that at-least-once delivery allows, not a loss. The Kafka backend's
// writes to Redis do not either: there Kafka holds the job, acknowledged
// by its in-sync replicas, and Redis only its state and backlog counter.

// shortOfReplicas fails every batch whose script succeeded (errs[i] ==
// nil) with waitErr, lua.ExecWait's error, marked as an unknown outcome.
func shortOfReplicas(errs []error, waitErr error) {
	err := fmt.Errorf("redisq: %w: %w", queue.ErrUnknownOutcome, waitErr)
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
		if errors.Is(err, lua.ErrWaitShort) {
			return true
		}
	}
	return false
}
