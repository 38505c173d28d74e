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

// TestMergeTenants: a scenario's runs of alternated rounds merge into the
// mean of each cost, the worst of each bound and the sum of the counts, so
// B ÷ A compares like with like whichever ran first.
func TestMergeTenants(t *testing.T) {
	rows := []Tenants{
		{Scenario: "active", Round: 1, Active: 2000, Rate: 1, ReadyS: 0.3, Arrivals: 120000, Aggregate: 2000, WorstErrPct: 0.2, WorstTenant: "a1",
			CountMin: 60, CountMax: 60, RSSMax: 100e6, RSSEnd: 99e6, Goroutines: 4500, DrainerCPUS: 18, RedisMemory: 80e6, RedisCmdsPerS: 86000, RedisCPUS: 20},
		{Scenario: "configured", Round: 1, Configured: 10000, Active: 2000, Rate: 1, DrainerCPUS: 21.6},
		{Scenario: "configured", Round: 2, Configured: 10000, Active: 2000, Rate: 1, DrainerCPUS: 23.4},
		{Scenario: "active", Round: 2, Active: 2000, Rate: 1, ReadyS: 0.4, Arrivals: 118627, Aggregate: 1977.1, WorstErrPct: 1.4, WorstTenant: "a2", Over: 3, Failed: 1,
			CountMin: 59, CountMax: 61, Dups: 2, RSSMax: 105e6, RSSEnd: 97e6, Goroutines: 4400, DrainerCPUS: 26, RedisMemory: 84e6, RedisCmdsPerS: 88000, RedisCPUS: 28, Err: "late"},
	}
	got, ok := ScenarioOf(rows, "active")
	want := Tenants{Scenario: "active", Runs: 2, Active: 2000, Rate: 1, ReadyS: 0.4, Arrivals: 238627, Aggregate: 1977.1, WorstErrPct: 1.4, WorstTenant: "a2",
		Over: 3, Failed: 1, CountMin: 59, CountMax: 61, Dups: 2, RSSMax: 105e6, RSSEnd: 99e6, Goroutines: 4500, DrainerCPUS: 22, RedisMemory: 82e6,
		RedisCmdsPerS: 87000, RedisCPUS: 24, Err: "late"}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); !ok || diff != "" {
		t.Errorf("ScenarioOf(active) ok %v (-want +got):\n%s", ok, diff)
	}
	b, _ := ScenarioOf(rows, "configured")
	a := got
	a.Err = ""
	if c, ok := CompareTenants(a, b); !ok || c.Ratios[4].Ratio != 22.5/22.0 {
		t.Errorf("drainer CPU B ÷ A of the merged rows = %+v (ok %v), want 22.5 ÷ 22", c.Ratios[4], ok)
	}
	if _, ok := ScenarioOf(rows, "none"); ok {
		t.Error("ScenarioOf of a scenario without runs: ok, want false")
	}
	one := rows[:1]
	if got, _ := ScenarioOf(one, "active"); got.DrainerCPUS != 18 || got.Runs != 1 || got.Round != 0 {
		t.Errorf("one run merged = CPU %v, runs %d, round %d; want it as it was, runs 1", got.DrainerCPUS, got.Runs, got.Round)
	}
}
