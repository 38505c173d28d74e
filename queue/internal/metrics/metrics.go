// Package metrics registers the series the queue backends share, so two
// producers or consumers on one registry find the same collectors.
package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Producer is the metrics of one producer, curried by backend.
type Producer struct {
	duration prometheus.Observer
	jobs     prometheus.Counter
	errors   prometheus.Counter
}

// NewProducer registers (or finds already registered on reg) the
// enqueue metrics and returns the ones of backend:
//
//	sluice_enqueue_duration_seconds{backend}  histogram of Enqueue calls
//	sluice_enqueued_jobs_total{backend}       jobs made durable
//	sluice_enqueue_errors_total{backend}      Enqueue calls that failed
func NewProducer(reg prometheus.Registerer, backend string) (*Producer, error) {
	dur, err := Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_enqueue_duration_seconds",
		Help:    "Time of one Enqueue call until the jobs are durable (or it failed).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 13), // 0.5ms .. 2s
	}, []string{"backend"}))
	if err != nil {
		return nil, err
	}
	jobs, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_enqueued_jobs_total",
		Help: "Jobs made durable on the queue backend.",
	}, []string{"backend"}))
	if err != nil {
		return nil, err
	}
	errs, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_enqueue_errors_total",
		Help: "Enqueue calls that returned an error (nothing or not everything durable).",
	}, []string{"backend"}))
	if err != nil {
		return nil, err
	}
	return &Producer{
		duration: dur.WithLabelValues(backend),
		jobs:     jobs.WithLabelValues(backend),
		errors:   errs.WithLabelValues(backend),
	}, nil
}

// RedisErrors registers (or finds) sluice_redis_errors_total{op} and
// returns its counter for op.
func RedisErrors(reg prometheus.Registerer, op string) (prometheus.Counter, error) {
	c, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_redis_errors_total",
		Help: "Redis commands that failed, by operation.",
	}, []string{"op"}))
	if err != nil {
		return nil, err
	}
	return c.WithLabelValues(op), nil
}

// Register registers c on reg and returns it, or returns the equal
// collector registered before (two producers on one registry share their
// metrics). A nil reg registers nothing.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
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

// Observe records one Enqueue call of n jobs that started at start.
func (m *Producer) Observe(start time.Time, n int, err error) {
	m.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.Inc()
		return
	}
	m.jobs.Add(float64(n))
}
