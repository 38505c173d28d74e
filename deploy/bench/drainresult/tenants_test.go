package drainresult

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestCompareTenants: the figures per idle tenant are B − A over the idle
// tenants; each ratio is B ÷ A within 10 %, the worst error also within
// when B's stays at or below the 1 % goal.
func TestCompareTenants(t *testing.T) {
	a := Tenants{Scenario: "active", Configured: 2000, Active: 2000, Aggregate: 2000, WorstErrPct: 0.1,
		RSSMax: 40e6, Goroutines: 2100, DrainerCPUS: 30, RedisMemory: 50e6, RedisCmdsPerS: 20000}
	b := Tenants{Scenario: "configured", Configured: 10000, Active: 2000, Aggregate: 1990, WorstErrPct: 0.6,
		RSSMax: 60e6, Goroutines: 2150, DrainerCPUS: 32, RedisMemory: 58e6, RedisCmdsPerS: 24000}
	got, ok := CompareTenants(a, b)
	want := TenantsCompare{Idle: 8000, MemoryPerIdle: 1000, CmdsPerIdle: 0.5, Ratios: []Ratio{
		{Figure: "aggregate jobs/s", A: 2000, B: 1990, Ratio: 0.995, Within: true},
		{Figure: "worst tenant error %", A: 0.1, B: 0.6, Ratio: 6, Within: true},
		{Figure: "drainer RSS max", A: 40e6, B: 60e6, Ratio: 1.5, Within: false},
		{Figure: "goroutines", A: 2100, B: 2150, Ratio: 2150.0 / 2100, Within: true},
		{Figure: "drainer CPU s", A: 30, B: 32, Ratio: 32.0 / 30, Within: true},
	}}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); !ok || diff != "" {
		t.Errorf("CompareTenants ok %v (-want +got):\n%s", ok, diff)
	}

	b.RSSMax = 43e6
	if got, _ := CompareTenants(a, b); !got.Met {
		t.Errorf("RSS 1.075×: Met false, want true: %+v", got.Ratios)
	}
	b.WorstErrPct, b.Failed = 0.6, 1
	if got, _ := CompareTenants(a, b); got.Met || got.Ratios[1].Within {
		t.Errorf("B has a tenant without a rate: worst error within %v, met %v; want false", got.Ratios[1].Within, got.Met)
	}
	b.Failed, b.WorstErrPct = 0, 1.5
	if got, _ := CompareTenants(a, b); got.Ratios[1].Within {
		t.Error("B's worst 1.5 % against A's 0.1 %: within, want not")
	}
	a.Goroutines = -1
	if got, _ := CompareTenants(a, b); got.Ratios[3].Within {
		t.Error("goroutines not read: within, want not")
	}
	if _, ok := CompareTenants(a, Tenants{Configured: 2000, Active: 2000}); ok {
		t.Error("B without idle tenants: ok, want false")
	}
	if _, ok := CompareTenants(Tenants{Err: "boom"}, b); ok {
		t.Error("A failed: ok, want false")
	}
}

func TestTenantsGoals(t *testing.T) {
	for _, tc := range []struct {
		t                Tenants
		aggregate, worst bool
	}{
		{Tenants{Active: 2000, Rate: 1, Aggregate: 1980, WorstErrPct: 1}, true, true},
		{Tenants{Active: 2000, Rate: 1, Aggregate: 1979, WorstErrPct: 1.01, Over: 1}, false, false},
		{Tenants{Active: 2000, Rate: 1, Aggregate: 2000, WorstErrPct: 0.2, Over: 1, Failed: 1}, true, false},
		{Tenants{Active: 2000, Rate: 1, Aggregate: 2000, Err: "died"}, false, false},
	} {
		if a, w := tc.t.AggregateMet(), tc.t.WorstMet(); a != tc.aggregate || w != tc.worst {
			t.Errorf("%+v: AggregateMet %v, WorstMet %v; want %v, %v", tc.t, a, w, tc.aggregate, tc.worst)
		}
	}
}
