// Package depth samples the tenants' backlog counters (keys.Backlog: queued,
// unfinished cost units) into the gauge sluice_queue_depth{tenant}. Ingest
// and every drainer export it, so the backlog stays visible, and alertable,
// when no drainer runs; dashboards and rules take max by tenant.
//
// The same read records the backlog and the measured outflow in the
// tenant's short history (keys.History, one slot per keys.HistoryStep over
// keys.HistorySpan), which ReadHistory returns for the web console's charts:
// recent history needs no Prometheus.
package depth

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/multiget"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// Every is how often the services sample.
const Every = 2 * time.Second

// NewGauge returns the sluice_queue_depth{tenant} gauge; help names who
// samples it.
func NewGauge(help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_queue_depth", Help: help}, []string{"tenant"})
}

// Sampler sets a gauge from the backlog counters of the tenants it is
// given. It is used by one goroutine.
type Sampler struct {
	Redis redis.UniversalClient
	Gauge *prometheus.GaugeVec
	shown map[string]bool
}

// Sample reads every tenant's counter and records its history sample, and
// sets its series: the counters in one MGET per 2,000 tenants (multiget; a
// GET each on a Cluster), then, for the tenants that have one,
// history_sample.lua (one call per tenant, in sorted order, all in one more
// round trip). A tenant without a counter (it never had jobs, or its
// counter expired) costs a key in an MGET, has no series and records no
// history (the script would record none either: it had no backlog and no
// outflow), so 10,000 configured idle tenants cost no script calls and no
// series; a tenant no longer given loses its series. It returns how many
// counters could not be read (their series keep their last value).
func (s *Sampler) Sample(ctx context.Context, tenants []string) (failed int) {
	counted := s.withCounter(ctx, tenants)
	slices.Sort(counted)
	calls := make([]lua.Call, len(counted))
	for i, t := range counted {
		calls[i] = sampleCall(t)
	}
	var cmds []*redis.Cmd
	if len(calls) > 0 {
		cmds = lua.Exec(ctx, s.Redis, calls, nil)
	}
	tenants = counted
	if s.shown == nil {
		s.shown = map[string]bool{}
	}
	now := make(map[string]bool, len(tenants))
	for i, t := range tenants {
		v, err := parseSample(cmds[i].Result())
		if err != nil {
			failed++
			if s.shown[t] {
				now[t] = true // keeps its last value
			}
			continue
		}
		if v == "" {
			continue // no counter: no series (a tenant that never had jobs)
		}
		now[t] = true
		n, _ := strconv.ParseFloat(v, 64)
		s.Gauge.WithLabelValues(t).Set(n)
	}
	for t := range s.shown {
		if !now[t] {
			s.Gauge.DeleteLabelValues(t)
		}
	}
	s.shown = now
	return failed
}

// withCounter returns those of tenants whose backlog counter exists, or
// could not be read (the script's call then reports the failure): one MGET
// of the counters on a single Redis (multiget).
func (s *Sampler) withCounter(ctx context.Context, tenants []string) []string {
	ks := make([]string, len(tenants))
	for i, t := range tenants {
		ks[i] = keys.Backlog(t)
	}
	vals, _, _ := multiget.Get(ctx, s.Redis, ks)
	var out []string
	for i, t := range tenants {
		if vals[i] != nil {
			out = append(out, t)
		}
	}
	return out
}

// Run samples every Every until ctx ends; tenants gives the tenants of each
// round, failed is told each round's failures (nil: not told).
func (s *Sampler) Run(ctx context.Context, tenants func() []string, failed func(int)) {
	tick := time.NewTicker(Every)
	defer tick.Stop()
	for {
		if n := s.Sample(ctx, tenants()); n > 0 && failed != nil && ctx.Err() == nil {
			failed(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
