package ingest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/depth"
)

// Admission results, the values of the result label.
const (
	resultAllowed  = "allowed"   // admitted by Redis
	resultDenied   = "denied"    // refused by a policy
	resultBacklog  = "backlog"   // refused by the backlog gate
	resultFailOpen = "fail_open" // decided in process, Redis unreachable
	resultError    = "error"     // Redis unreachable, tenant fails closed (503)
	resultInvalid  = "invalid"   // the limiter refused the request's arguments (500)
)

// metrics are ingest's Prometheus metrics. Label values are bounded: tenant
// is always a configured tenant (requests are authenticated first), route is
// one of the fixed route names, code a status code, algorithm one of the
// five algorithms or "none".
type metrics struct {
	decisions         *prometheus.CounterVec   // sluice_admission_decisions_total{tenant,algorithm,result}
	admissionDuration prometheus.Histogram     // sluice_admission_duration_seconds
	requests          *prometheus.CounterVec   // sluice_http_requests_total{route,code}
	requestDuration   *prometheus.HistogramVec // sluice_http_request_duration_seconds{route}
	failOpen          *prometheus.CounterVec   // sluice_fail_open_total{tenant}
	replays           *prometheus.CounterVec   // sluice_idempotent_replays_total{tenant}
	depth             *prometheus.GaugeVec     // sluice_queue_depth{tenant}, sampled by Serve
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_admission_decisions_total",
			Help: "Admission decisions by tenant, algorithm of the deciding policy, and result (allowed, denied, backlog, fail_open, error, invalid).",
		}, []string{"tenant", "algorithm", "result"}),
		admissionDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_admission_duration_seconds",
			Help:    "Time of one admission call to Redis (one EVALSHA), including failed ones.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 13), // 0.1ms .. 0.4s
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_requests_total",
			Help: "HTTP requests answered by ingest, by route and status code.",
		}, []string{"route", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_http_request_duration_seconds",
			Help:    "Time from reading a request's headers to writing its answer, by route.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 0.1ms .. 3.3s
		}, []string{"route"}),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_fail_open_total",
			Help: "Requests decided by the in-process limiter because Redis was unreachable (tenants with on_limiter_error: allow).",
		}, []string{"tenant"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_idempotent_replays_total",
			Help: "Requests answered from a stored answer because their client id was seen before.",
		}, []string{"tenant"}),
		depth: depth.NewGauge("The tenant's backlog: queued, not yet finished units (keys.Backlog), sampled by ingest and every drainer for their configured tenants; take max by tenant."),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.decisions, m.admissionDuration, m.requests, m.requestDuration, m.failOpen, m.replays, m.depth} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("ingest: register metrics: %w", err)
		}
	}
	return m, nil
}

// decision counts one admission decision.
func (m *metrics) decision(ts *tenantState, algorithm, result string) {
	if algorithm == "" {
		algorithm = ts.algorithm
	}
	m.decisions.WithLabelValues(ts.name, algorithm, result).Inc()
	if result == resultFailOpen {
		m.failOpen.WithLabelValues(ts.name).Inc()
	}
}

// statusWriter records the status code an http.Handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument counts and times every request of route.
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	dur := m.requestDuration.WithLabelValues(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		dur.Observe(time.Since(start).Seconds())
		m.requests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
	})
}
