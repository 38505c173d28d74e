package drainer

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// otherTenant is the tenant label of every tenant not in the configuration,
// so the label set stays bounded.
const otherTenant = "_other"

// metrics are the drainer's Prometheus series, all prefixed sluice_.
type metrics struct {
	dispatch     *prometheus.CounterVec   // tenant, result
	duration     *prometheus.HistogramVec // tenant
	retries      *prometheus.CounterVec   // tenant, kind
	dlq          *prometheus.CounterVec   // tenant, reason
	dropped      *prometheus.CounterVec   // tenant, reason
	water        *prometheus.GaugeVec     // tenant
	configured   *prometheus.GaugeVec     // tenant
	effective    *prometheus.GaugeVec     // tenant
	measured     *prometheus.GaugeVec     // tenant
	depth        *prometheus.GaugeVec     // tenant (configured tenants only)
	inflight     prometheus.Gauge
	errors       *prometheus.CounterVec // op
	leaseLost    prometheus.Counter
	reaped       prometheus.Counter
	outflowWaits prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		dispatch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_dispatch_total", Help: "Delivery attempts by tenant and result (done, retry, retry_after, dead, stopped).",
		}, []string{"tenant", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_dispatch_duration_seconds", Help: "Time of one delivery attempt to the downstream.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"tenant"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_retries_total", Help: "Jobs deferred for a retry, by kind (backoff, retry_after).",
		}, []string{"tenant", "kind"}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_dlq_total", Help: "Jobs sent to the dead-letter queue, by reason.",
		}, []string{"tenant", "reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_dropped_total", Help: "Jobs dropped unsent at the head of their lane, by reason (expired, cancelled).",
		}, []string{"tenant", "reason"}),
		water: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_water_level", Help: "The tenant's shared leaky-bucket water level in units, as last seen by this drainer.",
		}, []string{"tenant"}),
		configured: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_outflow_configured_rate", Help: "The tenant's configured (or overridden) outflow rate, units per second.",
		}, []string{"tenant"}),
		effective: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_outflow_effective_rate", Help: "The tenant's effective outflow rate after adaptive backoff, units per second.",
		}, []string{"tenant"}),
		measured: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_outflow_measured_rate", Help: "Units per second this drainer dispatched for the tenant over the last measuring window; sum over drainers for the total.",
		}, []string{"tenant"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_queue_depth", Help: "The tenant's backlog: queued, not yet finished units (keys.Backlog), sampled by every drainer for its configured tenants; take max by tenant.",
		}, []string{"tenant"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_drainer_inflight", Help: "Jobs this drainer is dispatching now.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_drainer_errors_total", Help: "Backend errors of the drainer by operation.",
		}, []string{"op"}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_lease_lost_total", Help: "Jobs whose lease expired before they were finished (they are delivered again).",
		}),
		reaped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_reaped_total", Help: "Expired leases this drainer returned to their queue.",
		}),
		outflowWaits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sluice_outflow_wait_seconds", Help: "Time a claimed job waited for its tenant's leaky bucket.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 12),
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.dispatch, m.duration, m.retries, m.dlq, m.dropped, m.water,
		m.configured, m.effective, m.measured, m.depth, m.inflight, m.errors, m.leaseLost, m.reaped, m.outflowWaits} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("drainer: register metrics: %w", err)
		}
	}
	return m, nil
}
