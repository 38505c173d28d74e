package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

func TestTenantOf(t *testing.T) {
	for id, want := range map[string]string{
		"bench-1-ten-active-t7-123": "bench-1-ten-active-t7",
		"acme-0":                    "acme",
		"acme":                      "acme",
		"a-b-":                      "a-b",
	} {
		if got := tenantOf(id); got != want {
			t.Errorf("tenantOf(%q) = %q, want %q", id, got, want)
		}
	}
}

// tenantArrivals returns n arrivals of tenant, ids "<tenant>-<i>", the i-th
// at start + i × gap + jitter(i).
func tenantArrivals(tenant string, start time.Time, n int, gap time.Duration, jitter func(int) time.Duration) []arrival {
	out := make([]arrival, n)
	for i := range out {
		out[i] = arrival{at: start.Add(time.Duration(i)*gap + jitter(i)), id: fmt.Sprintf("%s-%d", tenant, i)}
	}
	return out
}

// TestMeasureTenants: over a 60-s window at 1 job/s, a tenant paced
// exactly has 0 % error whatever its phase against the window (where a
// count would be off by one); one whose last arrival inside the window is
// 0.6 s late has just over 1 % (59 ÷ 59.6); one arriving twice as fast 100 %; one
// with a single arrival inside, and one with none, have no rate.
func TestMeasureTenants(t *testing.T) {
	from, window := t0.Add(10*time.Second), 60*time.Second
	none := func(int) time.Duration { return 0 }
	var arr []arrival
	arr = append(arr, tenantArrivals("exact", from.Add(-5*time.Second), 80, time.Second, none)...)                        // 60 inside
	arr = append(arr, tenantArrivals("phase", from.Add(-4500*time.Millisecond), 80, time.Second, none)...)                // 60 inside
	arr = append(arr, tenantArrivals("late", from.Add(200*time.Millisecond), 60, time.Second, func(i int) time.Duration { // 60 inside over 59.6 s
		if i == 59 {
			return 600 * time.Millisecond
		}
		return 0
	})...)
	arr = append(arr, tenantArrivals("fast", from, 120, 500*time.Millisecond, none)...)
	arr = append(arr, tenantArrivals("one", from.Add(59*time.Second), 3, time.Second, none)...) // 1 inside
	arr = append(arr, tenantArrivals("other", from, 5, time.Second, none)...)                   // not an active tenant
	var got drainresult.Tenants
	measureTenants(&got, arr, from, window, []string{"exact", "phase", "late", "fast", "one", "never"}, 1)
	want := drainresult.Tenants{
		Arrivals: 60 + 60 + 60 + 120 + 1 + 5, Aggregate: float64(60+60+60+120+1+5) / 60,
		WorstErrPct: 100, WorstTenant: "fast", Over: 4, Failed: 2, CountMin: 0, CountMax: 120,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("measureTenants (-want +got):\n%s", diff)
	}

	rates := tenantRates(arr, from, from.Add(window))
	for tenant, wantRate := range map[string]float64{"exact": 1, "phase": 1, "late": 59 / 59.6, "fast": 2, "one": 0} {
		if r := rates[tenant].rate(); fmt.Sprintf("%.6f", r) != fmt.Sprintf("%.6f", wantRate) {
			t.Errorf("%s: rate %.6f, want %.6f", tenant, r, wantRate)
		}
	}
}

// TestMeasureTenantsAllWithin: every tenant within 1 %: Over 0, the worst
// named.
func TestMeasureTenantsAllWithin(t *testing.T) {
	from, window := t0, 20*time.Second
	wobble := func(i int) time.Duration { return time.Duration(i%3) * time.Millisecond }
	arr := append(tenantArrivals("a", from, 20, time.Second, wobble), tenantArrivals("b", from.Add(time.Millisecond), 20, 1005*time.Millisecond, wobble)...)
	var got drainresult.Tenants
	measureTenants(&got, arr, from, window, []string{"a", "b"}, 1)
	if got.Over != 0 || got.Failed != 0 || got.WorstTenant != "b" || got.WorstErrPct < 0.49 || got.WorstErrPct > 0.51 {
		t.Errorf("got over %d, failed %d, worst %s %.3f %%; want 0, 0, b about 0.5 %%", got.Over, got.Failed, got.WorstTenant, got.WorstErrPct)
	}
	if !got.WorstMet() {
		t.Error("WorstMet() = false, want true")
	}
}

func TestParseProc(t *testing.T) {
	rss, err := parseVmRSS("Name:\tdrainer\nVmPeak:\t  900 kB\nVmRSS:\t   34100 kB\nThreads: 9\n")
	if err != nil || rss != 34100*1024 {
		t.Errorf("parseVmRSS = %d, %v; want %d", rss, err, 34100*1024)
	}
	if _, err := parseVmRSS("Name: x\n"); err == nil {
		t.Error("parseVmRSS without VmRSS: no error")
	}
	// The command holds a space and a bracket; utime 250, stime 50 ticks.
	stat := "4242 (drain er)) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0 100 1000 2000"
	cpu, err := parseStatCPU(stat)
	if err != nil || cpu != 3 {
		t.Errorf("parseStatCPU = %g, %v; want 3", cpu, err)
	}
	if _, err := parseStatCPU("4242 (x) S 1 2"); err == nil {
		t.Error("parseStatCPU of a short line: no error")
	}
	text := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 491\ngo_goroutines_x 7\n"
	if g, ok := parseMetric(text, "go_goroutines"); !ok || g != 491 {
		t.Errorf("parseMetric = %g, %v; want 491, true", g, ok)
	}
	if _, ok := parseMetric(text, "go_threads"); ok {
		t.Error("parseMetric found a metric that is not there")
	}
}
