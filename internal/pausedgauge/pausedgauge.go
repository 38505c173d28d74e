// Package pausedgauge is sluice_outflow_paused{tenant}, which ingest and
// every drainer export: 1 while a configured tenant's outflow is paused
// (outflow.paused). Only paused tenants have a series, so 10,000 configured
// tenants cost no series while none is paused; the alert rules read it as
// `== 1` (absent and 0 alike are "not paused").
package pausedgauge

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
)

// Gauge is the sluice_outflow_paused gauge and the tenants it shows.
type Gauge struct {
	// Vec is the collector to register.
	Vec   *prometheus.GaugeVec
	mu    sync.Mutex
	shown map[string]bool
}

// New returns the gauge, with no series.
func New() *Gauge {
	return &Gauge{shown: map[string]bool{}, Vec: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_outflow_paused",
		Help: "1 while the tenant's outflow is paused (outflow.paused: no delivery starts); only paused tenants have a series. Exported by ingest and every drainer for their configured tenants, take max by tenant.",
	}, []string{"tenant"})}
}

// Set shows the paused tenants of tenants at 1 and removes every other
// series.
func (g *Gauge) Set(tenants map[string]config.Tenant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := map[string]bool{}
	for id, t := range tenants {
		if t.Outflow.Paused {
			g.Vec.WithLabelValues(id).Set(1)
			now[id] = true
		}
	}
	for id := range g.shown {
		if !now[id] {
			g.Vec.DeleteLabelValues(id)
		}
	}
	g.shown = now
}
