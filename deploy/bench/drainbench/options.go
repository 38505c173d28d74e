package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// options is one benchmark run's settings, read from BENCH_* environment
// variables (see the package comment for each one and its default).
type options struct {
	quick    bool
	duration time.Duration // steady window of an accuracy row
	warmup   time.Duration // before the steady window, from the first arrival
	rates    []float64     // accuracy target rates, jobs/s
	workers  []int         // accuracy drainer (and BullMQ worker) processes
	systems  map[string]bool
	parts    map[string]bool

	tputJobs    int             // jobs pre-loaded per throughput row
	tputWorkers []int           // throughput worker processes
	tputTenants []int           // throughput tenants (sluice; BullMQ has one queue)
	backends    map[string]bool // sluice throughput backends

	bullConcurrency int           // BullMQ Worker concurrency
	bullWindow      time.Duration // BullMQ limiter duration; max = rate × window

	holJobs int // jobs of tenant B in the head-of-line benchmarks

	redisAddr    string // empty: a private redis-server for the run
	kafkaBrokers []string
	root         string // repository root
	outDir       string // results directory
	jsonPath     string // BENCH_JSON: a second copy of the JSON results
	profileDir   string // BENCH_PROFILE: CPU profiles of cmd/drainer throughput rows
	env          []string
}

// envNames are the variables options reads, in the order the report lists
// them.
var envNames = []string{
	"BENCH_QUICK", "BENCH_DURATION", "BENCH_WARMUP", "BENCH_RATES", "BENCH_WORKERS",
	"BENCH_SYSTEMS", "BENCH_PARTS", "BENCH_BACKENDS", "BENCH_TPUT_JOBS", "BENCH_TPUT_WORKERS", "BENCH_TPUT_TENANTS",
	"BENCH_BULLMQ_CONCURRENCY", "BENCH_BULLMQ_WINDOW", "BENCH_HOL_JOBS", "BENCH_REDIS",
	"BENCH_RESULTS", "BENCH_JSON", "BENCH_PROFILE", "SLUICE_TEST_REDIS", "SLUICE_TEST_KAFKA",
}

// loadOptions reads the BENCH_* variables through get (os.Getenv in main)
// and fills the defaults: the full matrix, or with BENCH_QUICK=1 the quick
// subset (5 s rows, rates 10 and 1000, 1 and 3 workers, 10,000-job
// throughput rows with 1 worker, 100 head-of-line jobs).
func loadOptions(get func(string) string, root string) (*options, error) {
	o := &options{root: root}
	o.quick = get("BENCH_QUICK") == "1" || get("BENCH_QUICK") == "true"
	def := func(full, quick string) string {
		if o.quick {
			return quick
		}
		return full
	}
	var err error
	str := func(name, full, quick string) string {
		if v := get(name); v != "" {
			return v
		}
		return def(full, quick)
	}
	dur := func(name, full, quick string) time.Duration {
		d, e := time.ParseDuration(str(name, full, quick))
		if e != nil || d <= 0 {
			err = fmt.Errorf("%s: want a positive duration such as 60s (got %q)", name, str(name, full, quick))
		}
		return d
	}
	ints := func(name, full, quick string) []int {
		var out []int
		for _, f := range strings.Split(str(name, full, quick), ",") {
			n, e := strconv.Atoi(strings.TrimSpace(f))
			if e != nil || n < 1 {
				err = fmt.Errorf("%s: want a comma-separated list of integers >= 1 (got %q)", name, str(name, full, quick))
				return nil
			}
			out = append(out, n)
		}
		return out
	}
	set := func(name, full, quick string, allowed ...string) map[string]bool {
		m := map[string]bool{}
		for _, f := range strings.Split(str(name, full, quick), ",") {
			f = strings.TrimSpace(f)
			ok := false
			for _, a := range allowed {
				ok = ok || a == f
			}
			if !ok {
				err = fmt.Errorf("%s: %q is not one of %s", name, f, strings.Join(allowed, ","))
			}
			m[f] = true
		}
		return m
	}

	o.duration = dur("BENCH_DURATION", "60s", "5s")
	o.warmup = dur("BENCH_WARMUP", "2s", "2s")
	for _, n := range ints("BENCH_RATES", "10,100,1000", "10,1000") {
		o.rates = append(o.rates, float64(n))
	}
	o.workers = ints("BENCH_WORKERS", "1,3,8", "1,3")
	o.systems = set("BENCH_SYSTEMS", "sluice,bullmq", "sluice,bullmq", "sluice", "bullmq")
	o.parts = set("BENCH_PARTS", "accuracy,throughput,hol", "accuracy,throughput,hol", "accuracy", "throughput", "hol")
	o.backends = set("BENCH_BACKENDS", "redis,kafka", "redis,kafka", "redis", "kafka")
	if v := ints("BENCH_TPUT_JOBS", "100000", "10000"); len(v) == 1 {
		o.tputJobs = v[0]
	}
	o.tputWorkers = ints("BENCH_TPUT_WORKERS", "1,3", "1")
	o.tputTenants = ints("BENCH_TPUT_TENANTS", "1,12", "1")
	if v := ints("BENCH_BULLMQ_CONCURRENCY", "16", "16"); len(v) == 1 {
		o.bullConcurrency = v[0]
	}
	o.bullWindow = dur("BENCH_BULLMQ_WINDOW", "1s", "1s")
	if v := ints("BENCH_HOL_JOBS", "500", "100"); len(v) == 1 {
		o.holJobs = v[0]
	}
	switch v := get("BENCH_REDIS"); v {
	case "":
	case "shared":
		o.redisAddr = firstNonEmpty(get("SLUICE_TEST_REDIS"), "127.0.0.1:6379")
	default:
		o.redisAddr = v
	}
	o.kafkaBrokers = strings.Split(firstNonEmpty(get("SLUICE_TEST_KAFKA"), "127.0.0.1:9092"), ",")
	o.outDir = firstNonEmpty(get("BENCH_RESULTS"), root+"/deploy/bench/results")
	o.jsonPath, o.profileDir = get("BENCH_JSON"), get("BENCH_PROFILE")
	for _, n := range envNames {
		if v := get(n); v != "" {
			o.env = append(o.env, n+"="+v)
		}
	}
	return o, err
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// keys returns m's keys, sorted.
func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// repoRoot walks up from the working directory to sluice's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("drainbench: working directory: %w", err)
	}
	for d := dir; ; {
		b, err := os.ReadFile(d + "/go.mod")
		if err == nil && strings.Contains(string(b), "module github.com/sluicehq/sluice\n") {
			return d, nil
		}
		parent := d[:max(strings.LastIndex(d, "/"), 0)]
		if parent == d || parent == "" {
			return "", fmt.Errorf("drainbench: no sluice go.mod above %s", dir)
		}
		d = parent
	}
}

// selected reports whether a BENCH_* variable narrowed or changed the full
// matrix (the report then does not call itself the full matrix).
func (o *options) selected() bool {
	for _, kv := range o.env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "BENCH_RESULTS", "BENCH_JSON", "BENCH_PROFILE", "BENCH_REDIS", "SLUICE_TEST_REDIS", "SLUICE_TEST_KAFKA":
		default:
			return true
		}
	}
	return false
}
