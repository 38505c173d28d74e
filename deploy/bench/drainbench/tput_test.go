package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTputOrder: one round runs every row once, BullMQ's two in the middle
// of sluice's; even rounds run sluice's rows in the reverse order.
func TestTputOrder(t *testing.T) {
	names := func(cs []tputCase) []string {
		var out []string
		for _, c := range cs {
			out = append(out, fmt.Sprintf("%s/%s/%s/t%d/n%d/r%d", c.system, c.backend, c.sink, c.tenants, c.workers, c.round))
		}
		return out
	}
	full, err := loadOptions(func(string) string { return "" }, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	quick, _ := loadOptions(func(k string) string { return map[string]string{"BENCH_QUICK": "1"}[k] }, "/repo")
	bullOnly, _ := loadOptions(func(k string) string { return map[string]string{"BENCH_SYSTEMS": "bullmq"}[k] }, "/repo")
	tests := []struct {
		name      string
		o         *options
		n, round  int
		want      []string
		wantTwice bool
	}{
		{"full matrix, 3 workers, round 1", full, 3, 1, []string{
			"sluice/kafka/http/t1/n3/r1", "sluice/kafka/handler/t1/n3/r1", "sluice/redis/http/t1/n3/r1", "sluice/redis/handler/t1/n3/r1",
			"bullmq/redis/noop/t1/n3/r1", "bullmq/redis/http/t1/n3/r1",
			"sluice/kafka/http/t12/n3/r1", "sluice/kafka/handler/t12/n3/r1", "sluice/redis/http/t12/n3/r1", "sluice/redis/handler/t12/n3/r1",
		}, false},
		{"full matrix, 3 workers, round 2: sluice's rows reversed", full, 3, 2, []string{
			"sluice/redis/handler/t12/n3/r2", "sluice/redis/http/t12/n3/r2", "sluice/kafka/handler/t12/n3/r2", "sluice/kafka/http/t12/n3/r2",
			"bullmq/redis/noop/t1/n3/r2", "bullmq/redis/http/t1/n3/r2",
			"sluice/redis/handler/t1/n3/r2", "sluice/redis/http/t1/n3/r2", "sluice/kafka/handler/t1/n3/r2", "sluice/kafka/http/t1/n3/r2",
		}, false},
		{"quick", quick, 1, 1, []string{
			"sluice/kafka/http/t1/n1/r1", "sluice/kafka/handler/t1/n1/r1",
			"bullmq/redis/noop/t1/n1/r1", "bullmq/redis/http/t1/n1/r1",
			"sluice/redis/http/t1/n1/r1", "sluice/redis/handler/t1/n1/r1",
		}, false},
		{"BullMQ only", bullOnly, 1, 3, []string{"bullmq/redis/noop/t1/n1/r3", "bullmq/redis/http/t1/n1/r3"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, names(tputOrder(tc.o, tc.n, tc.round))); diff != "" {
				t.Errorf("tputOrder (-want +got):\n%s", diff)
			}
		})
	}
	// Rounds 1 and 3 run the same order; every round the same rows.
	a, b, c := tputOrder(full, 1, 1), tputOrder(full, 1, 2), tputOrder(full, 1, 3)
	rows := func(cs []tputCase, round string) []string {
		var out []string
		for _, c := range cs {
			out = append(out, strings.TrimSuffix(c.name("x"), round))
		}
		return out
	}
	if diff := cmp.Diff(rows(a, "-r1"), rows(c, "-r3")); diff != "" {
		t.Errorf("rounds 1 and 3 (-1 +3):\n%s", diff)
	}
	ra, rb := rows(a, "-r1"), rows(b, "-r2")
	slices.Sort(ra)
	slices.Sort(rb)
	if diff := cmp.Diff(ra, rb); diff != "" {
		t.Errorf("rows of rounds 1 and 2 (-1 +2):\n%s", diff)
	}
}

func TestLoadOptionsRounds(t *testing.T) {
	tests := []struct {
		env     map[string]string
		want    int
		wantErr bool
	}{
		{nil, 4, false},
		{map[string]string{"BENCH_QUICK": "1"}, 1, false},
		{map[string]string{"BENCH_QUICK": "1", "BENCH_TPUT_ROUNDS": "5"}, 5, false},
		{map[string]string{"BENCH_TPUT_ROUNDS": "0"}, 0, true},
		{map[string]string{"BENCH_TPUT_ROUNDS": "2,3"}, 0, true},
	}
	for _, tc := range tests {
		o, err := loadOptions(func(k string) string { return tc.env[k] }, "/repo")
		if (err != nil) != tc.wantErr || (!tc.wantErr && o.tputRounds != tc.want) {
			t.Errorf("%v: rounds %d, err %v; want %d, error %v", tc.env, o.tputRounds, err, tc.want, tc.wantErr)
		}
		if !tc.wantErr && tc.env["BENCH_TPUT_ROUNDS"] != "" && !strings.Contains(strings.Join(o.env, " "), "BENCH_TPUT_ROUNDS=") {
			t.Errorf("%v: the report's command lacks BENCH_TPUT_ROUNDS: %v", tc.env, o.env)
		}
	}
}

// TestThroughputSection: a row's line gives the median over the rounds,
// the rounds' figures, and its ratios as medians of the rounds' ratios;
// failures and skips are noted by round.
func TestThroughputSection(t *testing.T) {
	o := &options{tputJobs: 1000, tputRounds: 3, bullConcurrency: 16}
	r := &report{o: o, redisNote: "a private redis-server started for this run on x"}
	row := func(c tputCase, rate float64, cmds float64) tputRow {
		t := c.row(1000)
		t.res = throughput{Jobs: 1000, Rate: rate}
		t.cmds = calls{all: cmds, scripts: 2}
		return t
	}
	for i, f := range []float64{1, 0.5, 1.1} {
		round := i + 1
		one := tputCase{system: "sluice", backend: "redis", sink: "handler", workers: 1, tenants: 1, round: round}
		twelve := one
		twelve.tenants = 12
		r.tput = append(r.tput,
			row(one, f*7500+float64(10*round), 20+float64(round)),
			row(tputCase{system: "bullmq", backend: "redis", sink: "noop", workers: 1, tenants: 1, round: round}, f*5000, 23),
			row(twelve, f*7000, 20))
	}
	r.tput[5].res.Dups = 2
	r.tput[8].err, r.tput[8].res = errors.New("no job arrived"), throughput{}
	kafka := tputRow{system: "sluice", backend: "kafka", sink: "http", workers: 1, tenants: 1, round: 1, jobs: 1000, skipped: "cmd/drainer refused the backend"}
	r.tput = append(r.tput, kafka)
	var b strings.Builder
	r.throughputSection(&b)
	md := b.String()
	for _, want := range []string{
		"ran 3 round(s), alternated",
		"| system | backend | consumer | workers | tenants | jobs | rounds | jobs/s | rounds' jobs/s | dups | Redis cmds/job (scripts) | vs BullMQ | vs 1 tenant | note |",
		// rates 7510, 3770, 8280: median 7510; ratios 1.502, 1.508, 1.5055
		"| sluice | redis | handler | 1 | 1 | 1000 | 3 of 3 | 7510 | 7510, 3770, 8280 | 0 | 22.0 (2.0) | 1.51× (1.50, 1.51, 1.51) |  |  |",
		// round 3 failed: medians of rounds 1 and 2; vs 1 tenant 0.932, 0.928
		"| sluice | redis | handler | 1 | 12 | 1000 | 2 of 3 | 5250 | 7000, 3500 | 2 | 20.0 (2.0) | 1.40× (1.40, 1.40) | 0.93× (0.93, 0.93) | round 3: failed: no job arrived |",
		"| bullmq | redis | noop | 1 | 1 | 1000 | 3 of 3 | 5000 | 5000, 2500, 5500 | 0 | 23.0 (2.0) |  |  |  |",
		"| sluice | kafka | http | 1 | 1 | 1000 | 0 of 1 | skipped |||||| cmd/drainer refused the backend |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("throughput section lacks\n%s\nin\n%s", want, md)
		}
	}
}
