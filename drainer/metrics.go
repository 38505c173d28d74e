package drainer

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/depth"
	"github.com/sluicehq/sluice/internal/pausedgauge"
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
	duplicates   *prometheus.CounterVec   // tenant
	water        *prometheus.GaugeVec     // tenant
	configured   *prometheus.GaugeVec     // tenant
	effective    *prometheus.GaugeVec     // tenant
	measured     *prometheus.GaugeVec     // tenant
	depth        *prometheus.GaugeVec     // tenant (configured tenants only)
	paused       *pausedgauge.Gauge       // tenant (paused tenants only)
	inflight     prometheus.Gauge
	lanes        prometheus.Gauge
	errors       *prometheus.CounterVec // op
	leaseLost    prometheus.Counter
	reaped       prometheus.Counter
	outflowWaits prometheus.Histogram
	lateSends    prometheus.Counter
	sendOffset   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		dispatch: counterVec("sluice_dispatch_total", "Delivery attempts by tenant and result (done, retry, retry_after, dead, stopped).", "tenant", "result"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_dispatch_duration_seconds", Help: "Time of one delivery attempt to the downstream.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"tenant"}),
		retries:    counterVec("sluice_retries_total", "Jobs deferred for a retry, by kind (backoff, retry_after).", "tenant", "kind"),
		dlq:        counterVec("sluice_dlq_total", "Jobs sent to the dead-letter queue, by reason.", "tenant", "reason"),
		dropped:    counterVec("sluice_dropped_total", "Jobs dropped unsent at the head of their lane, by reason (expired, cancelled, heartbeat).", "tenant", "reason"),
		duplicates: counterVec("sluice_jobs_duplicate_skipped_total", "Copies of jobs delivered already (same id and enqueued_at, state done) settled unsent at the head of their lane.", "tenant"),
		water:      gaugeVec("sluice_water_level", "The tenant's shared leaky-bucket water level in units, as last seen by this drainer."),
		configured: gaugeVec("sluice_outflow_configured_rate", "The tenant's configured (or overridden) outflow rate, units per second."),
		effective:  gaugeVec("sluice_outflow_effective_rate", "The tenant's effective outflow rate after adaptive backoff, units per second."),
		measured:   gaugeVec("sluice_outflow_measured_rate", "Units per second this drainer dispatched for the tenant over the last measuring window; sum over drainers for the total."),
		depth:      depth.NewGauge("The tenant's backlog: queued, not yet finished units (keys.Backlog), sampled by ingest and every drainer for their configured tenants; take max by tenant."),
		paused:     pausedgauge.New(),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_drainer_inflight", Help: "Jobs this drainer is dispatching now.",
		}),
		lanes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_drainer_lanes", Help: "Tenants this drainer runs a lane (pull loops) for now; under the Redis and Kafka backends a lane ends after a few idle seconds and starts again when its tenant has jobs.",
		}),
		errors: counterVec("sluice_drainer_errors_total", "Backend errors of the drainer by operation.", "op"),
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
		lateSends: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_drainer_late_sends_total", Help: "Shaped jobs whose dispatch reached its send time on the bucket's clock (the turn + the least answer latency + 5 ms) after it had passed (a slow answer, or a wait for room or for the start's record): sent at once, that much behind their turn.",
		}),
		sendOffset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_drainer_send_offset_seconds", Help: "This drainer's send clock offset: its clock less the bucket's (Redis TIME), the least answer latency it saw; a shaped job is sent at its turn + this + 5 ms. Drainers of one tenant whose offsets differ by d can send rate × d more jobs in a 1-s window than the bucket granted.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.dispatch, m.duration, m.retries, m.dlq, m.dropped, m.duplicates, m.water,
		m.configured, m.effective, m.measured, m.depth, m.paused.Vec, m.inflight, m.lanes, m.errors, m.leaseLost, m.reaped, m.outflowWaits, m.lateSends, m.sendOffset} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("drainer: register metrics: %w", err)
		}
	}
	return m, nil
}

// forget removes a tenant's gauges (its water level and outflow rates)
// when it leaves the configuration: a deleted tenant's last values would
// read as live (its later samples go to otherTenant). Its counters stay,
// as counters do: their rates fall to 0.
func (m *metrics) forget(tenant string) {
	for _, g := range []*prometheus.GaugeVec{m.water, m.configured, m.effective, m.measured} {
		g.DeleteLabelValues(tenant)
	}
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// gaugeVec is a gauge by tenant.
func gaugeVec(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"tenant"})
}

// sentCounter returns the tenant's dispatched-units counter.
func (d *Drainer) sentCounter(tenant string) *atomic.Int64 {
	d.sentMu.Lock()
	defer d.sentMu.Unlock()
	c, ok := d.sent[tenant]
	if !ok {
		c = new(atomic.Int64)
		d.sent[tenant] = c
	}
	return c
}

// measureEvery is the window of sluice_outflow_measured_rate.
const measureEvery = 5 * time.Second

// measure flushes the outflow counts (flushOutflow) every second and
// publishes each tenant's dispatched units per second over the last
// measureEvery until ctx is done; then it flushes a last time.
func (d *Drainer) measure(ctx context.Context) {
	last := map[string]int64{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			d.flushOutflow(context.WithoutCancel(ctx))
			return
		case <-tick.C:
		}
		d.flushOutflow(ctx)
		if n%int(measureEvery/time.Second) != 0 {
			continue
		}
		d.sentMu.Lock()
		for t, c := range d.sent {
			n := c.Load()
			d.m.measured.WithLabelValues(d.label(t)).Set(float64(n-last[t]) / measureEvery.Seconds())
			last[t] = n
		}
		d.sentMu.Unlock()
	}
}
