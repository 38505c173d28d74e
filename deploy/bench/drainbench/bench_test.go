//go:build bench

package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

// testWriter sends the harness's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// tenantsSmoke keeps TestQuick's tenants part small unless BENCH_TENANTS_*
// say otherwise: 50 active of 200 configured tenants, a 5 s window.
var tenantsSmoke = map[string]string{
	"BENCH_TENANTS_ACTIVE": "50", "BENCH_TENANTS_CONFIGURED": "200", "BENCH_TENANTS_WARMUP": "3s", "BENCH_TENANTS_WINDOW": "5s",
}

// TestQuick runs the quick subset end to end against the servers of
// deploy/local/services.sh and checks that every row ran; the goals are
// reported, not asserted (the machine is shared and the rows are short).
//
//	go test -tags bench -run TestQuick -timeout 20m -v ./deploy/bench/drainbench
//
// BENCH_* variables still apply (BENCH_QUICK is forced on, and the report
// goes to a temporary directory unless BENCH_RESULTS is set).
func TestQuick(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	results := t.TempDir()
	get := func(k string) string {
		switch {
		case k == "BENCH_QUICK":
			return "1"
		case k == "BENCH_RESULTS" && os.Getenv(k) == "":
			return results
		case os.Getenv(k) == "" && tenantsSmoke[k] != "":
			return tenantsSmoke[k] // a smoke of the tenants part, not its figures
		}
		return os.Getenv(k)
	}
	o, err := loadOptions(get, root)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runBench(context.Background(), o, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	md := r.markdown()
	t.Log("\n" + md)
	if _, err := r.write(md); err != nil {
		t.Fatal(err)
	}
	perCell := 0 // accuracy rows per rate and worker count: sluice's one per backend, BullMQ's one
	if o.systems["sluice"] {
		perCell += len(o.accBackends)
	}
	if o.systems["bullmq"] {
		perCell++
	}
	if want := len(o.rates) * len(o.workers) * perCell; o.parts["accuracy"] && len(r.acc) != want {
		t.Errorf("%d accuracy rows, want %d", len(r.acc), want)
	}
	for _, a := range r.acc {
		if a.err != nil || a.res.Jobs == 0 {
			t.Errorf("accuracy %s %s rate %g × %d: %d jobs in the window, err %v", a.system, a.backend, a.rate, a.workers, a.res.Jobs, a.err)
		}
	}
	for _, row := range r.tput {
		if row.skipped != "" {
			t.Logf("throughput %s %s %s skipped: %s", row.system, row.backend, row.sink, row.skipped)
			continue
		}
		if row.err != nil || row.res.Jobs < row.jobs {
			t.Errorf("throughput %s %s %s × %d: %d of %d jobs, err %v", row.system, row.backend, row.sink, row.workers, row.res.Jobs, row.jobs, row.err)
		}
	}
	if o.parts["tenants"] && len(r.ten) != 2 {
		t.Errorf("%d tenants scenarios, want 2", len(r.ten))
	}
	for _, row := range r.ten {
		if row.err != nil || row.res.Arrivals == 0 {
			t.Errorf("tenants %s: %d arrivals in the window, err %v", row.res.Scenario, row.res.Arrivals, row.err)
		}
	}
	if r.holErr != nil || (o.parts["hol"] && len(r.hol) == 0) {
		t.Errorf("head-of-line: %d rows, err %v", len(r.hol), r.holErr)
	}
}
