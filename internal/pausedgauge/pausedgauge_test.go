package pausedgauge_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/pausedgauge"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestOnlyPausedTenantsHaveASeries: a paused tenant shows 1, an unpaused
// one no series; resuming or removing a tenant removes its series.
func TestOnlyPausedTenantsHaveASeries(t *testing.T) {
	g := pausedgauge.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(g.Vec)
	series := func(tenant string) (float64, bool) {
		return testenv.Metric(t, reg, "sluice_outflow_paused", map[string]string{"tenant": tenant})
	}
	paused := config.Tenant{Outflow: config.Outflow{Paused: true}}
	g.Set(map[string]config.Tenant{"a": paused, "b": {}, "c": paused})
	if v, ok := series("a"); !ok || v != 1 {
		t.Errorf("paused a: %v %v, want 1", v, ok)
	}
	if _, ok := series("b"); ok {
		t.Error("unpaused b has a series")
	}
	g.Set(map[string]config.Tenant{"a": {}, "b": {}})
	for _, tn := range []string{"a", "b", "c"} {
		if _, ok := series(tn); ok {
			t.Errorf("%s has a series after resume or removal", tn)
		}
	}
}
