package queue

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/keys"
)

// ErrInvalidJob wraps every error a Producer returns for a job it refuses
// before talking to the backend (an invalid tenant, no id, a cost below 1, a
// job larger than the backend accepts). Nothing of that Enqueue call was
// written. ingest answers it with a 4xx, never with a retry.
var ErrInvalidJob = errors.New("queue: invalid job")

// ProducerDeps are the shared services a producer is built with.
type ProducerDeps struct {
	// Redis holds the Redis queue (Redis backend) and the tenants' backlog
	// counters (both backends). Required by the Redis backend; with the Kafka
	// backend a nil Redis disables the backlog counter.
	Redis redis.UniversalClient
	// Log receives the errors that are not returned (a backlog counter that
	// could not be written after Kafka acknowledged). Nil discards them.
	Log *slog.Logger
	// Registerer receives the producer's metrics. Nil registers nothing (the
	// metrics still work, unexported).
	Registerer prometheus.Registerer
}

func (d ProducerDeps) logger() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// tenantBatch is the jobs of one tenant from one Enqueue call, encoded, in
// the order they were given.
type tenantBatch struct {
	tenant string
	cost   int64
	jobs   []*Envelope
	values [][]byte
}

// prepareJobs checks and encodes jobs and groups them by tenant, keeping the
// order of first appearance of each tenant and the order of jobs within one.
// A zero Version becomes EnvelopeVersion and a zero EnqueuedAt becomes now,
// in a copy: the caller's jobs are not modified. Any invalid job fails the
// whole call with an error wrapping ErrInvalidJob.
func prepareJobs(jobs []Envelope, now time.Time) ([]tenantBatch, error) {
	var batches []tenantBatch
	index := make(map[string]int, 1)
	for i := range jobs {
		e := jobs[i]
		if err := checkJob(&e); err != nil {
			return nil, err
		}
		if e.Version == 0 {
			e.Version = EnvelopeVersion
		}
		if e.EnqueuedAt.IsZero() {
			e.EnqueuedAt = now
		}
		b, err := e.Encode()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidJob, err)
		}
		k, ok := index[e.Tenant]
		if !ok {
			k = len(batches)
			index[e.Tenant] = k
			batches = append(batches, tenantBatch{tenant: e.Tenant})
		}
		tb := &batches[k]
		tb.cost += e.Cost
		tb.jobs = append(tb.jobs, &e)
		tb.values = append(tb.values, b)
	}
	return batches, nil
}

// checkJob returns an error wrapping ErrInvalidJob when e cannot be queued.
func checkJob(e *Envelope) error {
	switch {
	case !keys.ValidTenant(e.Tenant):
		return fmt.Errorf("%w: job %q: tenant %q is not 1-64 characters of [A-Za-z0-9._-]", ErrInvalidJob, e.ID, e.Tenant)
	case e.ID == "":
		return fmt.Errorf("%w: a job of tenant %s has no id", ErrInvalidJob, e.Tenant)
	case e.Cost < 1:
		return fmt.Errorf("%w: job %s: cost %d is below 1", ErrInvalidJob, e.ID, e.Cost)
	case e.Version != 0 && e.Version != EnvelopeVersion:
		return fmt.Errorf("%w: job %s: %w: %d", ErrInvalidJob, e.ID, ErrUnknownVersion, e.Version)
	}
	return nil
}

// wrapUnavailable marks err, an error from the backend, as ErrUnavailable
// while keeping err itself in the chain for errors.Is and errors.As.
func wrapUnavailable(op string, err error) error {
	return fmt.Errorf("queue: %s: %w: %w", op, ErrUnavailable, err)
}

// producerMetrics are the metrics of one producer, curried by backend.
type producerMetrics struct {
	duration prometheus.Observer
	jobs     prometheus.Counter
	errors   prometheus.Counter
}

// newProducerMetrics registers (or finds already registered on reg) the
// enqueue metrics and returns the ones of backend:
//
//	sluice_enqueue_duration_seconds{backend}  histogram of Enqueue calls
//	sluice_enqueued_jobs_total{backend}       jobs made durable
//	sluice_enqueue_errors_total{backend}      Enqueue calls that failed
func newProducerMetrics(reg prometheus.Registerer, backend string) (*producerMetrics, error) {
	dur, err := registerCollector(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_enqueue_duration_seconds",
		Help:    "Time of one Enqueue call until the jobs are durable (or it failed).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 13), // 0.5ms .. 2s
	}, []string{"backend"}))
	if err != nil {
		return nil, err
	}
	jobs, err := registerCollector(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_enqueued_jobs_total",
		Help: "Jobs made durable on the queue backend.",
	}, []string{"backend"}))
	if err != nil {
		return nil, err
	}
	errs, err := registerCollector(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_enqueue_errors_total",
		Help: "Enqueue calls that returned an error (nothing or not everything durable).",
	}, []string{"backend"}))
	if err != nil {
		return nil, err
	}
	return &producerMetrics{
		duration: dur.WithLabelValues(backend),
		jobs:     jobs.WithLabelValues(backend),
		errors:   errs.WithLabelValues(backend),
	}, nil
}

// newRedisErrors registers (or finds) sluice_redis_errors_total{op} and
// returns its counter for op.
func newRedisErrors(reg prometheus.Registerer, op string) (prometheus.Counter, error) {
	c, err := registerCollector(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_redis_errors_total",
		Help: "Redis commands that failed, by operation.",
	}, []string{"op"}))
	if err != nil {
		return nil, err
	}
	return c.WithLabelValues(op), nil
}

// registerCollector registers c on reg and returns it, or returns the equal
// collector registered before (two producers on one registry share their
// metrics). A nil reg registers nothing.
func registerCollector[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("queue: register metrics: %w", err)
	}
	return c, nil
}

// observe records one Enqueue call of n jobs that started at start.
func (m *producerMetrics) observe(start time.Time, n int, err error) {
	m.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.Inc()
		return
	}
	m.jobs.Add(float64(n))
}
