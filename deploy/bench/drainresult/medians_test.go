package drainresult

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		vs   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"odd, unsorted", []float64{7790, 7512, 7651}, 7651},
		{"even: the middle two's mean", []float64{4, 1, 3, 2}, 2.5},
		{"an outlier does not move it", []float64{1.5, 1.6, 9}, 1.6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.vs...)
			if got := Median(tc.vs); got != tc.want {
				t.Errorf("Median(%v) = %g, want %g", tc.vs, got, tc.want)
			}
			if diff := cmp.Diff(in, tc.vs); diff != "" {
				t.Errorf("Median changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

// sl and bull build one round's row.
func sl(round int, backend, consumer string, workers, tenants int, rate, cmds float64) Throughput {
	return Throughput{Round: round, System: "sluice", Backend: backend, Consumer: consumer, Workers: workers, Tenants: tenants,
		Jobs: 1000, Rate: rate, Cmds: cmds, Scripts: cmds / 10}
}

func bull(round int, consumer string, workers int, rate float64) Throughput {
	return Throughput{Round: round, System: "bullmq", Backend: "redis", Consumer: consumer, Workers: workers, Tenants: 1,
		Jobs: 1000, Rate: rate, Cmds: 23, Scripts: 1}
}

// TestMedians: each row's median rate over the rounds, and its ratios as
// medians of the per-round ratios (not the ratio of the medians), paired
// within a round; failed and skipped rounds left out of every figure.
func TestMedians(t *testing.T) {
	var rows []Throughput
	// Three rounds in run order: sluice rows with BullMQ's in the middle.
	// Round 2 drifts: everything at half speed, so its ratios hold.
	for r, f := range []float64{1, 0.5, 1} {
		round := r + 1
		rows = append(rows,
			sl(round, "redis", "handler", 1, 1, f*6000+float64(round), 40+float64(round)),
			bull(round, "noop", 1, f*4000),
			bull(round, "http", 1, f*3000),
			sl(round, "redis", "handler", 1, 12, f*5700, 38),
		)
	}
	rows[3].Rate = 5100                                                               // round 1: 12 tenants at 0.85×
	rows = append(rows, sl(1, "redis", "http", 1, 1, 3600, 0), bull(1, "http", 3, 0)) // no cmds read; a failed
	rows[len(rows)-1].Err = "no job arrived"                                          // BullMQ row of 3 workers
	rows = append(rows, sl(1, "redis", "http", 3, 1, 3000, 41))
	rows = append(rows, sl(2, "redis", "http", 3, 1, 0, 0))
	rows[len(rows)-1].Skipped = "refused"

	want := []TputMedian{
		{System: "sluice", Backend: "redis", Consumer: "handler", Workers: 1, Tenants: 1, Jobs: 1000,
			Rates: []float64{6001, 3002, 6003}, Rate: 6001, Cmds: 42, Scripts: 4.2,
			VsBullRounds: []float64{6001.0 / 4000, 3002.0 / 2000, 6003.0 / 4000}, VsBull: 6003.0 / 4000},
		{System: "sluice", Backend: "redis", Consumer: "handler", Workers: 1, Tenants: 12, Jobs: 1000,
			Rates: []float64{5100, 2850, 5700}, Rate: 5100, Cmds: 38, Scripts: 3.8,
			VsBullRounds: []float64{5100.0 / 4000, 2850.0 / 2000, 5700.0 / 4000}, VsBull: 5700.0 / 4000,
			VsOneRounds: []float64{5100.0 / 6001, 2850.0 / 3002, 5700.0 / 6003}, VsOne: 2850.0 / 3002},
		{System: "sluice", Backend: "redis", Consumer: "http", Workers: 1, Tenants: 1, Jobs: 1000,
			Rates: []float64{3600}, Rate: 3600, VsBullRounds: []float64{1.2}, VsBull: 1.2},
		{System: "bullmq", Backend: "redis", Consumer: "noop", Workers: 1, Tenants: 1, Jobs: 1000,
			Rates: []float64{4000, 2000, 4000}, Rate: 4000, Cmds: 23, Scripts: 1},
		{System: "bullmq", Backend: "redis", Consumer: "http", Workers: 1, Tenants: 1, Jobs: 1000,
			Rates: []float64{3000, 1500, 3000}, Rate: 3000, Cmds: 23, Scripts: 1},
		{System: "sluice", Backend: "redis", Consumer: "http", Workers: 3, Tenants: 1, Jobs: 1000,
			Rates: []float64{3000}, Rate: 3000, Cmds: 41, Scripts: 4.1},
		{System: "bullmq", Backend: "redis", Consumer: "http", Workers: 3, Tenants: 1, Jobs: 1000},
	}
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9*max(1, math.Abs(a)) })
	if diff := cmp.Diff(want, Medians(rows), approx, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Medians (-want +got):\n%s", diff)
	}
}

// TestMediansOneRound: rows without a round (files written before rounds)
// are one round, their ratios those of the single pair.
func TestMediansOneRound(t *testing.T) {
	got := Medians([]Throughput{sl(0, "kafka", "http", 1, 1, 4187, 31.7), bull(0, "http", 1, 5177)})
	if len(got) != 2 || got[0].Rate != 4187 || got[0].VsBull != 4187.0/5177 || len(got[0].VsBullRounds) != 1 {
		t.Errorf("Medians = %+v; want kafka http at 4187 jobs/s, vs BullMQ 4187/5177 from one round", got)
	}
}
