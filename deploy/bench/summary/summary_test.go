package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// TestParseGoBench: result lines only, the -GOMAXPROCS suffix dropped,
// repeated runs kept, get returning their median.
func TestParseGoBench(t *testing.T) {
	b := benches{}
	parseGoBench(strings.NewReader(`pkg: x
BenchmarkIngest/redis-2   5000   124599 ns/op   8026 jobs/s   258 allocs/op
BenchmarkIngest/redis-2   5000   124599 ns/op   8000 jobs/s   260 allocs/op
BenchmarkIngest/redis-2   5000   124599 ns/op   9000 jobs/s   262 allocs/op
BenchmarkX-16   notanumber   1 ns/op
--- BENCH: BenchmarkIngest/kafka-2
    bench_test.go:1: BenchmarkIngest/kafka-2 1 2 jobs/s
BenchmarkLocal   1000000   45.1 ns/op   0 B/op
`), b)
	got := map[string]float64{}
	for _, k := range []struct{ name, unit string }{
		{"BenchmarkIngest/redis", "jobs/s"}, {"BenchmarkIngest/redis", "allocs/op"}, {"BenchmarkLocal", "ns/op"},
	} {
		v, ok := b.get(k.name, k.unit)
		if !ok {
			t.Errorf("%s %s: not found", k.name, k.unit)
		}
		got[k.name+" "+k.unit] = v
	}
	want := map[string]float64{"BenchmarkIngest/redis jobs/s": 8026, "BenchmarkIngest/redis allocs/op": 260, "BenchmarkLocal ns/op": 45.1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("medians (-want +got):\n%s", diff)
	}
	for _, name := range []string{"BenchmarkX", "BenchmarkIngest/kafka"} {
		if _, ok := b.get(name, "jobs/s"); ok || b[name] != nil {
			t.Errorf("%s parsed from a line that is not a result: %v", name, b[name])
		}
	}
}

// TestSummarySample renders testdata/run, a sample of every input, and
// checks the rows it feeds and that the rows it lacks read "not run".
func TestSummarySample(t *testing.T) {
	in, err := load("testdata/run")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]row{}
	for _, r := range in.rows() {
		if _, dup := rows[r.what]; dup {
			t.Errorf("two rows named %q", r.what)
		}
		rows[r.what] = r
	}
	want := []row{
		{"admission: GCRA decisions/s, 64 goroutines, vs redis_rate (median of paired rounds)", "166061", "90251", "1.84×", "≥ 1.8×", "yes"},
		{"admission: p99 decision latency at half of peak, µs, vs redis_rate", "2900", "5800", "0.50×", "stated", "—"},
		{"ingest, Redis backend, 32 clients: jobs/s vs the hand-written peer", "8026", "11143", "0.72×", "≥ 1.3×", "**no**"},
		{"ingest: Redis CPU per 202, µs, vs the hand-written peer", "55.8", "33.7", "1.65×", "< 1× (less)", "**no**"},
		{"ingest: allocations per request (the server's) vs before (d7b8cec)", "258", "185", "1.39×", "≤ 0.5× (≤ 92.5)", "**no**"},
		{"ingest: Kafka backend jobs/s vs the Redis backend's", notRun, notRun, notRun, "≥ 0.7×", notRun},
		{"Kafka enqueue, acks=all: records/s vs kafka-producer-perf-test (p99 ms in brackets)", "12080 (40.5)", "25126 (512)", "0.48×", "≥ 0.8×", "**no**"},
		{"Kafka enqueue without the post-ack Redis write (the produce path alone): records/s vs kafka-producer-perf-test", "60250 (8.1)", "25126 (512)", "2.40×", "stated", "—"},
		// Drain rows: medians over the rounds, ratios the medians of the
		// rounds' ratios (here 0.7507, 0.75, 0.75: not 6404/8531), the
		// goal only met over at least 3 rounds.
		{"drain, redis, 1 drainer(s), 1 tenant(s): Go Handler vs BullMQ no-op, jobs/s (median of alternated rounds)", "6404", "8531", "0.75× (3 rounds)", "≥ 1.5×, ≥ 3 rounds", "**no**"},
		{"drain, redis, 1 drainer(s), 1 tenant(s): HTTP vs BullMQ HTTP, jobs/s (median of alternated rounds)", "6900", "5177", "1.33× (3 rounds)", "≥ 1.3×, ≥ 3 rounds", "yes"},
		{"drain, kafka, 1 drainer(s), 1 tenant(s): HTTP vs BullMQ HTTP, jobs/s (median of alternated rounds)", "4187", "5177", "0.81× (1 round)", "≥ 1.3×, ≥ 3 rounds", "**no**"},
		{"drain, redis, 1 drainer(s), 12 tenant(s): Go Handler vs BullMQ no-op, jobs/s (median of alternated rounds)", "6050", "8531", "0.72× (2 rounds)", "≥ 1.5×, ≥ 3 rounds", "**no**"},
		{"drain, redis, 3 drainer(s), 1 tenant(s): HTTP vs BullMQ HTTP, jobs/s (median of alternated rounds)", notRun, notRun, notRun, "≥ 1.3×, ≥ 3 rounds", notRun},
		{"drain, redis, handler, 1 drainer(s): 12 tenants vs 1, jobs/s (median of alternated rounds)", "6050", "6404", "0.96× (2 rounds)", "≥ 0.9×, ≥ 3 rounds", "**no** (ratio met over 2 rounds; the goal needs 3)"},
		{"drain, redis, http, 1 drainer(s): 12 tenants vs 1, jobs/s (median of alternated rounds)", notRun, notRun, notRun, "≥ 0.9×, ≥ 3 rounds", notRun},
		{"Redis cmds (script calls) per job, redis, unthrottled, 1 drainer(s), vs BullMQ", "40.8 (3.00)", "23.0 (1.00)", "1.77×", "≤ 2 calls, < 1× cmds", "**no**"},
		{"Redis cmds (script calls) per job, redis, 1000 jobs/s, 1 drainer(s), vs BullMQ", "44.0 (4.00)", "26.2 (1.00)", "1.68×", "≤ 2 calls, < 1× cmds", "**no**"},
		{"Redis cmds (script calls) per job, redis, 100 jobs/s, 1 drainer(s), vs BullMQ", notRun, notRun, notRun, "≤ 2 calls, < 1× cmds", notRun},
		{"accuracy, redis: outflow error, worst row of 2 (here 10/s × 3)", "-0.15 %", "-0.30 % (1000/s × 1)", "—", "within ±0.1 %", "**no**"},
		{"accuracy, redis: inter-dispatch gap SD (by send time), worst row of 2 (here 10/s × 3)", "6.90 ms", "22.00 ms (1000/s × 1)", "—", "≤ 2 ms", "**no**"},
		{"accuracy, redis: gap SD of the arrivals at the sink, worst row of 2 (here 10/s × 3)", "6.90 ms", "22.00 ms (1000/s × 1)", "—", "stated", "—"},
		// A file without send times (the Redis rows here) is judged at the sink.
		{"accuracy, redis: most deliveries sent in a 1-s window ÷ (rate + capacity), worst row of 2 (here 10/s × 3)", "21 of 20 (1.05)", "1000 of 2000 (0.50) (1000/s × 1)", "—", "≤ 1", "**no**"},
		{"accuracy, redis: most arrivals at the sink in a 1-s window ÷ (rate + capacity), worst row of 2 (here 10/s × 3)", "21 of 20 (1.05)", "1000 of 2000 (0.50) (1000/s × 1)", "—", "stated", "—"},
		{"Redis cmds (script calls) per job, kafka, 1000 jobs/s, 1 drainer(s), vs BullMQ", "24.5 (2.00)", "26.2 (1.00)", "0.94×", "≤ 2 calls, < 1× cmds", "yes"},
		{"Redis cmds (script calls) per job, kafka, 100 jobs/s, 1 drainer(s), vs BullMQ", notRun, notRun, notRun, "≤ 2 calls, < 1× cmds", notRun},
		// Each backend's worst row for each bound, judged on its own.
		{"accuracy, kafka: outflow error, worst row of 2 (here 10/s × 3)", "+0.01 %", "-0.30 % (1000/s × 1)", "—", "within ±0.1 %", "yes"},
		// 10/s × 3 has send times (0.40 ms by them, 1.20 at the sink); 1000/s × 1 none.
		{"accuracy, kafka: inter-dispatch gap SD (by send time), worst row of 2 (here 1000/s × 1)", "2.40 ms", "22.00 ms (1000/s × 1)", "—", "≤ 2 ms", "**no**"},
		{"accuracy, kafka: gap SD of the arrivals at the sink, worst row of 2 (here 1000/s × 1)", "2.40 ms", "22.00 ms (1000/s × 1)", "—", "stated", "—"},
		// The bound is judged on the send times; the sink's spread is stated.
		{"accuracy, kafka: most deliveries sent in a 1-s window ÷ (rate + capacity), worst row of 2 (here 10/s × 3)", "20 of 20 (1.00)", "1000 of 2000 (0.50) (1000/s × 1)", "—", "≤ 1", "yes"},
		{"accuracy, kafka: most arrivals at the sink in a 1-s window ÷ (rate + capacity), worst row of 2 (here 10/s × 3)", "22 of 20 (1.10)", "1000 of 2000 (0.50) (1000/s × 1)", "—", "stated", "—"},
	}
	for _, w := range want {
		got, ok := rows[w.what]
		if !ok {
			t.Errorf("no row %q", w.what)
			continue
		}
		if diff := cmp.Diff(w, got, cmp.AllowUnexported(row{})); diff != "" {
			t.Errorf("row %q (-want +got):\n%s", w.what, diff)
		}
	}
	md := render(in, header{at: time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC), command: "make bench", commit: "abc1234", machine: "2 CPUs"})
	for _, s := range []string{"Commit `abc1234`, 2026-12-01 17:00 UTC, `make bench`. Machine: 2 CPUs.",
		"| what | sluice | peer | ratio | goal | met |", "(a private server: exact)",
		"each figure is the median over 3 alternated round(s)", "each ratio the median of the rounds' ratios"} {
		if !strings.Contains(md, s) {
			t.Errorf("summary lacks %q:\n%s", s, md)
		}
	}
}

// TestSampleMedians: the sample's stored medians are drainresult.Medians of
// its per-round rows, as drainbench writes them.
func TestSampleMedians(t *testing.T) {
	d, err := drainresult.Read("testdata/run/drain.json")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(drainresult.Medians(d.Throughput), d.TputMedians, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("tput_medians (-Medians(throughput) +stored):\n%s", diff)
	}
}

// TestSummaryNothingRan: an empty run directory gives every row "not run".
func TestSummaryNothingRan(t *testing.T) {
	in, err := load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range in.rows() {
		if r.sluice != notRun || r.met != notRun {
			t.Errorf("row %q: sluice %q, met %q; want %q", r.what, r.sluice, r.met, notRun)
		}
	}
}

// TestRoundsRow: a drain ratio is the median of the rounds' ratios, met
// only over at least minRounds rounds.
func TestRoundsRow(t *testing.T) {
	s := drainresult.TputMedian{Rate: 7651}
	p := drainresult.TputMedian{Rate: 5000}
	tests := []struct {
		name   string
		ok     bool
		ratio  float64
		rounds []float64
		want   row
	}{
		{"met over 3 rounds", true, 1.55, []float64{1.5, 1.55, 1.6}, row{"x", "7651", "5000", "1.55× (3 rounds)", "≥ 1.5×, ≥ 3 rounds", "yes"}},
		{"missed over 3 rounds", true, 1.45, []float64{1.5, 1.45, 1.4}, row{"x", "7651", "5000", "1.45× (3 rounds)", "≥ 1.5×, ≥ 3 rounds", "**no**"}},
		{"met over 1 round only", true, 1.6, []float64{1.6}, row{"x", "7651", "5000", "1.60× (1 round)", "≥ 1.5×, ≥ 3 rounds", "**no** (ratio met over 1 round; the goal needs 3)"}},
		{"never both in a round", true, 0, nil, row{"x", "7651", "5000", "no round with both", "≥ 1.5×, ≥ 3 rounds", "**no**"}},
		{"not run", false, 0, nil, row{"x", notRun, notRun, notRun, "≥ 1.5×, ≥ 3 rounds", notRun}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, roundsRow("x", s, p, tc.ok, tc.ratio, tc.rounds, 1.5), cmp.AllowUnexported(row{})); diff != "" {
				t.Errorf("roundsRow (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAccuracyNoBackend: an accuracy row of a file written before rows
// named their backend counts as Redis, never as Kafka.
func TestAccuracyNoBackend(t *testing.T) {
	in := inputs{drain: &drainresult.Report{Accuracy: []drainresult.Accuracy{
		{System: "sluice", Rate: 10, Workers: 1, Capacity: 10, Jobs: 50, ErrPct: 0.01, MaxWindow: 20, GapSDMs: 1},
	}}}
	got := map[string]string{}
	for _, r := range in.accuracyRows() {
		got[r.what] = r.met
	}
	want := map[string]string{
		"accuracy, redis: outflow error, worst row of 1 (here 10/s × 1)":                                                 "yes",
		"accuracy, redis: inter-dispatch gap SD (by send time), worst row of 1 (here 10/s × 1)":                          "yes",
		"accuracy, redis: gap SD of the arrivals at the sink, worst row of 1 (here 10/s × 1)":                            "—",
		"accuracy, redis: most deliveries sent in a 1-s window ÷ (rate + capacity), worst row of 1 (here 10/s × 1)":      "yes",
		"accuracy, redis: most arrivals at the sink in a 1-s window ÷ (rate + capacity), worst row of 1 (here 10/s × 1)": "—",
		"accuracy, kafka: outflow error, worst row":                                                                      notRun,
		"accuracy, kafka: inter-dispatch gap SD (by send time), worst row":                                               notRun,
		"accuracy, kafka: gap SD of the arrivals at the sink, worst row":                                                 notRun,
		"accuracy, kafka: most deliveries sent in a 1-s window ÷ (rate + capacity), worst row":                           notRun,
		"accuracy, kafka: most arrivals at the sink in a 1-s window ÷ (rate + capacity), worst row":                      notRun,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("accuracy rows' met (-want +got):\n%s", diff)
	}
}

// TestPairedRowIsTheMedianOfRoundRatios: with the same rounds on both
// sides (make bench's BENCH_COUNT rounds), the ratio is the median of the
// rounds' ratios, not the ratio of the medians; with unequal rounds it
// falls back to the ratio of the medians.
func TestPairedRowIsTheMedianOfRoundRatios(t *testing.T) {
	b := benches{
		"S": {"jobs/s": {100, 300, 200}, "x": {100, 200}},
		"P": {"jobs/s": {100, 100, 400}, "x": {100}},
	}
	r := b.pairedRow("w", "S", "P", "jobs/s", "%.0f", "≥ 1.3×", atLeast(1.3))
	// Rounds' ratios 1.0, 3.0, 0.5: median 1.0 (the medians' ratio would be 200/100 = 2.0).
	if r.ratio != "1.00× (3 rounds)" || r.met != "**no**" || r.sluice != "200" || r.peer != "100" {
		t.Errorf("paired row = %+v, want ratio 1.00× (3 rounds), not met, medians 200 and 100", r)
	}
	if r := b.pairedRow("w", "S", "P", "x", "%.0f", "≥ 1.3×", atLeast(1.3)); r.ratio != "1.50×" || r.met != "yes" {
		t.Errorf("unequal rounds: %+v, want the medians' ratio 1.50×, met", r)
	}
}
