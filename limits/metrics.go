package limits

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Admitter's own metrics. Decisions by tenant, algorithm and
// result are counted by the caller (ingest), which knows the tenant's labels.
type metrics struct {
	batchSize prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	m := &metrics{
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_admission_batch_size",
			Help:    "Admission decisions sent in one pipelined round trip.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 9), // 1 … 256
		}),
	}
	if reg == nil {
		return m
	}
	m.batchSize = register(reg, m.batchSize, log)
	return m
}

// register registers c on reg, or returns the collector already registered
// under its name, so several Admitters can share one registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, log *slog.Logger) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	log.Warn("limits: metric not registered", slog.String("error", err.Error()))
	return c
}
