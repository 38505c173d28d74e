package main

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// TestDrainerConfPprof: with BENCH_PROFILE the generated configuration
// turns drainer.pprof on; without it, it stays at its default (off).
func TestDrainerConfPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := drainerConf{redisAddr: "127.0.0.1:6379", backend: "redis", listen: "127.0.0.1:9101",
			tenants: []string{"bench-1"}, sinkURL: "http://127.0.0.1:9100/hook", pprof: on}
		cfg, err := config.Parse([]byte(c.yaml()))
		if err != nil {
			t.Fatalf("config.Parse of\n%s\n= %v", c.yaml(), err)
		}
		if cfg.Drainer.Pprof != on {
			t.Errorf("pprof %v: drainer.pprof = %v", on, cfg.Drainer.Pprof)
		}
	}
}

// TestResultJSON: the JSON results carry every row's figures and errors
// and read back as written.
func TestResultJSON(t *testing.T) {
	dir := t.TempDir()
	o := &options{quick: true, outDir: dir, jsonPath: filepath.Join(dir, "drain.json"), tputRounds: 1}
	r := &report{o: o, started: time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC), command: "make bench-drain",
		machine: []string{"2 CPUs"}, loadStart: "1 1 1", loadEnd: "2 2 2", redisNote: "a private redis-server started for this run on x"}
	r.acc = []accRow{{system: "sluice", backend: "kafka", rate: 100, workers: 3, capacity: 100, cmds: calls{all: 41, scripts: 3},
		res: accuracy{Jobs: 500, Rate: 100.01, ErrPct: 0.01, MaxWindow: 200, GapSD: 2500 * time.Microsecond}}}
	r.tput = []tputRow{
		{system: "sluice", backend: "kafka", sink: "handler", workers: 1, tenants: 12, round: 1, jobs: 10000, res: throughput{Rate: 7000}, cmds: calls{all: 31.5, scripts: 4}},
		{system: "bullmq", backend: "redis", sink: "noop", workers: 1, tenants: 1, round: 1, jobs: 10000, err: errors.New("no job\narrived")},
	}
	paths, err := r.writeJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := &drainresult.Report{
		Started: "2026-12-01T17:00:00Z", Quick: true, Command: "make bench-drain", Machine: []string{"2 CPUs"},
		LoadStart: "1 1 1", LoadEnd: "2 2 2", CmdsExact: true,
		Accuracy: []drainresult.Accuracy{{System: "sluice", Backend: "kafka", Rate: 100, Workers: 3, Capacity: 100, Jobs: 500,
			Achieved: 100.01, ErrPct: 0.01, MaxWindow: 200, GapSDMs: 2.5, Cmds: 41, Scripts: 3}},
		TputRounds: 1,
		Throughput: []drainresult.Throughput{
			{Round: 1, System: "sluice", Backend: "kafka", Consumer: "handler", Workers: 1, Tenants: 12, Jobs: 10000, Rate: 7000, Cmds: 31.5, Scripts: 4},
			{Round: 1, System: "bullmq", Backend: "redis", Consumer: "noop", Workers: 1, Tenants: 1, Jobs: 10000, Err: "no job arrived"},
		},
		// The failed BullMQ round leaves no ratio; no 1-tenant row, none either.
		TputMedians: []drainresult.TputMedian{
			{System: "sluice", Backend: "kafka", Consumer: "handler", Workers: 1, Tenants: 12, Jobs: 10000, Rates: []float64{7000}, Rate: 7000, Cmds: 31.5, Scripts: 4},
			{System: "bullmq", Backend: "redis", Consumer: "noop", Workers: 1, Tenants: 1, Jobs: 10000},
		},
	}
	if len(paths) != 2 || paths[0] != filepath.Join(dir, "20261201T170000Z.json") {
		t.Errorf("paths = %v", paths)
	}
	for _, p := range paths {
		got, err := drainresult.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", p, diff)
		}
	}
}
