package main

import (
	"fmt"
	"os"
	"slices"
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
	tputRounds  int             // rounds of the throughput rows of each worker count
	backends    map[string]bool // sluice throughput backends
	accBackends []string        // sluice accuracy backends, in run order

	bullConcurrency int           // BullMQ Worker concurrency
	bullWindow      time.Duration // BullMQ limiter duration; max = rate × window

	holJobs int // jobs of tenant B in the head-of-line benchmarks

	tenActive     int           // tenants part: active tenants (a backlog each, 1 job/s)
	tenConfigured int           // tenants part: configured tenants of scenario B
	tenWarmup     time.Duration // tenants part: from the first arrival to the window
	tenWindow     time.Duration // tenants part: measuring window
	tenRounds     int           // tenants part: rounds of A and B, alternated

	redisAddr    string // empty: a private redis-server for the run
	kafkaBrokers []string
	root         string // repository root
	outDir       string // results directory
	jsonPath     string // BENCH_JSON: a second copy of the JSON results
	profileDir   string // BENCH_PROFILE: CPU profiles of cmd/drainer throughput rows and tenants windows
	env          []string
}

// envNames are the variables options reads, in the order the report lists
// them.
var envNames = []string{
	"BENCH_QUICK", "BENCH_DURATION", "BENCH_WARMUP", "BENCH_RATES", "BENCH_WORKERS",
	"BENCH_SYSTEMS", "BENCH_PARTS", "BENCH_BACKENDS", "BENCH_ACC_BACKENDS", "BENCH_TPUT_JOBS", "BENCH_TPUT_WORKERS", "BENCH_TPUT_TENANTS",
	"BENCH_TPUT_ROUNDS",
	"BENCH_BULLMQ_CONCURRENCY", "BENCH_BULLMQ_WINDOW", "BENCH_HOL_JOBS",
	"BENCH_TENANTS_ACTIVE", "BENCH_TENANTS_CONFIGURED", "BENCH_TENANTS_WARMUP", "BENCH_TENANTS_WINDOW", "BENCH_TENANTS_ROUNDS", "BENCH_REDIS",
	"BENCH_RESULTS", "BENCH_JSON", "BENCH_PROFILE", "SLUICE_TEST_REDIS", "SLUICE_TEST_KAFKA",
}

// loadOptions reads the BENCH_* variables through get (os.Getenv in main)
// and fills the defaults: the full matrix, or with BENCH_QUICK=1 the quick
// subset (5 s rows, rates 10 and 1000, 1 and 3 workers, 10,000-job
// throughput rows with 1 worker in 1 round, 100 head-of-line jobs, a 20 s
// tenants window).
func loadOptions(get func(string) string, root string) (*options, error) {
	o := &options{root: root}
	o.quick = get("BENCH_QUICK") == "1" || get("BENCH_QUICK") == "true"
	e := &envReader{get: get, quick: o.quick}
	o.duration = e.dur("BENCH_DURATION", "60s", "5s")
	o.warmup = e.dur("BENCH_WARMUP", "2s", "2s")
	for _, n := range e.ints("BENCH_RATES", "10,100,1000", "10,1000") {
		o.rates = append(o.rates, float64(n))
	}
	o.workers = e.ints("BENCH_WORKERS", "1,3,8", "1,3")
	o.systems = e.set("BENCH_SYSTEMS", "sluice,bullmq", "sluice,bullmq", "sluice", "bullmq")
	o.parts = e.set("BENCH_PARTS", "accuracy,throughput,tenants,hol", "accuracy,throughput,tenants,hol",
		"accuracy", "throughput", "tenants", "hol")
	o.backends = e.set("BENCH_BACKENDS", "redis,kafka", "redis,kafka", "redis", "kafka")
	o.accBackends = e.list("BENCH_ACC_BACKENDS", "redis,kafka", "redis,kafka", "redis", "kafka")
	o.tputJobs = e.one("BENCH_TPUT_JOBS", "100000", "10000")
	o.tputWorkers = e.ints("BENCH_TPUT_WORKERS", "1,3", "1")
	o.tputTenants = e.ints("BENCH_TPUT_TENANTS", "1,12", "1")
	o.tputRounds = e.one("BENCH_TPUT_ROUNDS", "4", "1")
	o.bullConcurrency = e.one("BENCH_BULLMQ_CONCURRENCY", "16", "16")
	o.bullWindow = e.dur("BENCH_BULLMQ_WINDOW", "1s", "1s")
	o.holJobs = e.one("BENCH_HOL_JOBS", "500", "100")
	o.tenActive = e.one("BENCH_TENANTS_ACTIVE", "2000", "2000")
	o.tenConfigured = e.one("BENCH_TENANTS_CONFIGURED", "10000", "10000")
	o.tenWarmup = e.dur("BENCH_TENANTS_WARMUP", "15s", "15s")
	o.tenWindow = e.dur("BENCH_TENANTS_WINDOW", "60s", "20s")
	o.tenRounds = e.one("BENCH_TENANTS_ROUNDS", "2", "2")
	if o.parts["tenants"] && o.tenConfigured <= o.tenActive && e.err == nil {
		e.err = fmt.Errorf("BENCH_TENANTS_CONFIGURED (%d) must exceed BENCH_TENANTS_ACTIVE (%d): scenario B has idle tenants", o.tenConfigured, o.tenActive)
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
	return o, e.err
}

// envReader parses BENCH_* variables: each read takes the variable's value
// or else its full or quick default, and a bad value sets err (the last
// one wins) and reads as the zero value.
type envReader struct {
	get   func(string) string
	quick bool
	err   error
}

func (e *envReader) str(name, full, quick string) string {
	if v := e.get(name); v != "" {
		return v
	}
	if e.quick {
		return quick
	}
	return full
}

func (e *envReader) dur(name, full, quick string) time.Duration {
	d, err := time.ParseDuration(e.str(name, full, quick))
	if err != nil || d <= 0 {
		e.err = fmt.Errorf("%s: want a positive duration such as 60s (got %q)", name, e.str(name, full, quick))
	}
	return d
}

func (e *envReader) ints(name, full, quick string) []int {
	var out []int
	for _, f := range strings.Split(e.str(name, full, quick), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			e.err = fmt.Errorf("%s: want a comma-separated list of integers >= 1 (got %q)", name, e.str(name, full, quick))
			return nil
		}
		out = append(out, n)
	}
	return out
}

// one is a variable of one integer >= 1.
func (e *envReader) one(name, full, quick string) int {
	v := e.ints(name, full, quick)
	if len(v) != 1 {
		if v != nil {
			e.err = fmt.Errorf("%s: want one integer >= 1 (got %q)", name, e.str(name, full, quick))
		}
		return 0
	}
	return v[0]
}

// set is a comma-separated subset of allowed.
func (e *envReader) set(name, full, quick string, allowed ...string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Split(e.str(name, full, quick), ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allowed, f) {
			e.err = fmt.Errorf("%s: %q is not one of %s", name, f, strings.Join(allowed, ","))
		}
		m[f] = true
	}
	return m
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
