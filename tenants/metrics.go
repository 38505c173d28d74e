package tenants

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// registryMetrics are a Registry's series; labels are bounded (four sources,
// two reasons).
type registryMetrics struct {
	updates *prometheus.CounterVec // sluice_registry_updates_total{source}
	reads   *prometheus.CounterVec // sluice_registry_reads_total{source}
	errors  *prometheus.CounterVec // sluice_registry_errors_total{reason}
	version prometheus.Gauge       // sluice_tenant_config_version
}

func newRegistryMetrics(reg prometheus.Registerer) (*registryMetrics, error) {
	m := &registryMetrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_registry_updates_total",
			Help: "Tenant configs applied by this process's registry, by what triggered them (pubsub, poll, file, local).",
		}, []string{"source"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_registry_reads_total",
			Help: "Full reads of the runtime tenants from Redis by this process's registry, changed or not, by what triggered them (pubsub, poll, local).",
		}, []string{"source"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_registry_errors_total",
			Help: "Registry failures that kept the running tenant config: read (Redis unreachable) or invalid (the merged config failed validation).",
		}, []string{"reason"}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_tenant_config_version",
			Help: "The global runtime-tenant change counter this process last read; equal on every instance once a change has landed.",
		}),
	}
	for _, s := range []string{SourcePubSub, SourcePoll, SourceFile, SourceLocal} {
		m.updates.WithLabelValues(s)
		m.reads.WithLabelValues(s)
	}
	m.errors.WithLabelValues("read")
	m.errors.WithLabelValues("invalid")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.updates, m.reads, m.errors, m.version} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("tenants: register metrics: %w", err)
		}
	}
	return m, nil
}
