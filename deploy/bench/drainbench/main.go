// Command drainbench measures sluice's drain side against BullMQ, the
// Node.js job queue, on the same machine and the same Redis, and prints a
// markdown report (issue 3, requirement 9). `make bench-drain` runs it;
// `make bench` calls that.
//
//	go run ./deploy/bench/drainbench                 # the full matrix, ~40 min
//	BENCH_QUICK=1 go run ./deploy/bench/drainbench   # the quick subset, ~6 min
//
// Accuracy: for each target rate and worker count, one tenant pre-loaded
// with enough jobs is drained by N cmd/drainer processes (built once,
// configured per row: outflow.rate = target, outflow.capacity left at its
// default max(1, rate)) into a measuring HTTP sink that records the arrival
// time of every job, once per backend of BENCH_ACC_BACKENDS (Kafka: a topic
// and consumer group of the row's own); then BullMQ with limiter {max: rate × window,
// duration: window} and N worker processes whose processor POSTs each job to
// the same sink. From the arrivals: achieved rate and its error, the most
// jobs in any sliding 1-s window (goal: ≤ rate + capacity), the jitter of the
// gaps between jobs, duplicates. The window's bound and the gap's jitter are
// judged on when each job was sent: the Sluice-Sent-At header that sluice's
// HTTP sink sets (drainer/http.go) and BullMQ's processor sets the same way
// (bullmq/bench.mjs), so the network's and the sink's latency (a first
// burst's jobs wait ~10 ms where the steady ones wait ~0.1 ms) does not
// count as the throttler's; the figures at the sink are reported beside
// them.
//
// Throughput: no limit, a pre-loaded backlog; sluice's cmd/drainer with the
// HTTP sink on the Redis and Kafka backends, sluice's Go Handler embedding,
// BullMQ with a POSTing and a no-op processor; jobs/s. The rows of each
// worker count run BENCH_TPUT_ROUNDS rounds, alternated (each round sluice's
// rows with BullMQ's in their middle, so a drift of the shared machine hits
// both); the report gives each row's median jobs/s and the medians of its
// per-round ratios to BullMQ and to 1 tenant (drainresult.Medians).
//
// Tenants (issue 11 requirement 3): one cmd/drainer process drains
// BENCH_TENANTS_ACTIVE tenants at 1 job/s each (scenario A), then the same
// number among BENCH_TENANTS_CONFIGURED configured tenants, the rest idle
// (B); over the window, the aggregate and each tenant's rate, the drainer's
// RSS, goroutines and CPU, Redis's memory, commands/s and CPU, and B's
// figures against A's. BENCH_TENANTS_ROUNDS rounds run A and B in
// alternated order (A B, B A, ...), and B ÷ A compares the mean of each
// cost (drainresult.MergeTenants), so the host's drift over the part weighs
// on both alike. It needs neither node nor Kafka.
//
// Head-of-line: the drainer package's HeadOfLine benchmarks, run with go
// test, their p50/p99 printed.
//
// Environment (defaults for the full run; BENCH_QUICK=1 changes those marked
// quick):
//
//	BENCH_QUICK               1: the quick subset, results not written to latest.md
//	BENCH_DURATION            steady window of an accuracy row (60s; quick 5s)
//	BENCH_WARMUP              least time from the first arrival to the steady window (2s); longer
//	                          until the burst allowance is spent, at most max(10s, duration/2) more
//	BENCH_RATES               target rates, jobs/s (10,100,1000; quick 10,1000)
//	BENCH_WORKERS             worker processes per accuracy row (1,3,8; quick 1,3)
//	BENCH_SYSTEMS             sluice,bullmq
//	BENCH_PARTS               accuracy,throughput,tenants,hol
//	BENCH_BACKENDS            sluice's throughput backends: redis,kafka
//	BENCH_ACC_BACKENDS        sluice's accuracy backends, in run order: redis,kafka (quick too); a
//	                          Kafka row has its own topic and consumer group
//	BENCH_TPUT_JOBS           jobs per throughput row (100000; quick 10000)
//	BENCH_TPUT_WORKERS        worker processes per throughput row (1,3; quick 1)
//	BENCH_TPUT_TENANTS        sluice tenants per throughput row (1,12; quick 1)
//	BENCH_TPUT_ROUNDS         rounds of the throughput rows of each worker count (4; quick 1): each
//	                          round runs every row once, BullMQ's rows in the middle of sluice's,
//	                          even rounds sluice's rows reversed; the report states medians
//	BENCH_BULLMQ_CONCURRENCY  BullMQ Worker concurrency (16; BullMQ's own default is 1)
//	BENCH_BULLMQ_WINDOW       BullMQ limiter duration (1s)
//	BENCH_HOL_JOBS            tenant B's jobs in the head-of-line benchmarks (500; quick 100)
//	BENCH_TENANTS_ACTIVE      tenants part: active tenants, each outflow.rate 1 with a backlog (2000)
//	BENCH_TENANTS_CONFIGURED  tenants part: configured tenants of scenario B, the same ones active,
//	                          the rest without jobs (10000)
//	BENCH_TENANTS_WARMUP      tenants part: from the first arrival to the window (15s)
//	BENCH_TENANTS_WINDOW      tenants part: measuring window (60s; quick 20s)
//	BENCH_TENANTS_ROUNDS      tenants part: rounds of A and B (2): odd rounds A then B, even B then A
//	BENCH_REDIS               the Redis both systems use: unset, a private redis-server the run
//	                          starts on a free loopback port (so other users of the shared server
//	                          neither disturb the rows nor count in cmds/job); "shared", the
//	                          server of SLUICE_TEST_REDIS (127.0.0.1:6379); or host:port.
//	                          sluice uses db 0, BullMQ db 1 under the prefix bench-bull
//	SLUICE_TEST_KAFKA         Kafka brokers (127.0.0.1:9092)
//	BENCH_RESULTS             results directory (deploy/bench/results)
//	BENCH_COMMAND             the command to print in the report (go run ./deploy/bench/drainbench)
//	BENCH_JSON                a file to write the results to as JSON too (deploy/bench/drainresult;
//	                          <timestamp>.json beside the report is always written)
//	BENCH_PROFILE             a directory: each cmd/drainer throughput row runs its drainers with
//	                          drainer.pprof on and saves the first one's CPU profile there
//	                          (<row>.cpu.pprof, over the row's expected drain time; read it with
//	                          go tool pprof -top); a Go Handler row saves the harness's own
//	                          profile over its drain (its drainers run embedded); and the
//	                          tenants part saves its drainer's profile over each scenario's
//	                          window (<scenario>.cpu.pprof)
//
// The report goes to stdout and to $BENCH_RESULTS/<UTC timestamp>.md (and
// .json), and
// for a full run also to $BENCH_RESULTS/latest.md. Start the servers first
// (bash deploy/local/services.sh up); node and npm must be on PATH (npm ci
// runs in deploy/bench/bullmq when its node_modules lacks bullmq).
//
// Exit codes: 0 when every row ran (goals met or not: the report says), 1
// when a row failed, 2 when the run could not start.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o, err := loadOptions(os.Getenv, root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drainbench:", err)
		return 2
	}
	r, err := runBench(ctx, o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	md := r.markdown()
	fmt.Print(md)
	path, err := r.write(md)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "drainbench: report written to", path)
	jsonPaths, err := r.writeJSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "drainbench: results as JSON in", strings.Join(jsonPaths, ", "))
	fmt.Fprintln(os.Stderr, "drainbench: process logs, each drainer's last /metrics (<log>.metrics), generated configurations and BullMQ timestamps are in", r.logDir)
	if r.failed() {
		return 1
	}
	return 0
}

// runBench sets up (drainer binary, BullMQ packages, sink, Redis clients),
// runs the selected parts and returns the report. Progress goes to progress.
// It returns an error only when the run could not start.
func runBench(ctx context.Context, o *options, progress io.Writer) (*report, error) {
	logf := func(format string, args ...any) {
		fmt.Fprintf(progress, "drainbench: "+format+"\n", args...)
	}
	r := &report{o: o, started: time.Now(), loadStart: loadavg()}
	defer func() { r.elapsed, r.loadEnd = time.Since(r.started), loadavg() }()
	r.command = strings.TrimSpace(strings.Join(o.env, " ") + " " + firstNonEmpty(os.Getenv("BENCH_COMMAND"), "go run ./deploy/bench/drainbench"))
	dir, err := os.MkdirTemp("", "drainbench-")
	if err != nil {
		return nil, fmt.Errorf("drainbench: run directory: %w", err)
	}
	r.logDir = dir
	b := &bench{o: o, rec: &recorder{}, dir: dir, runID: time.Now().UTC().Format("150405"), logf: logf}
	r.redisNote = "the server at " + o.redisAddr
	if o.redisAddr == "" {
		b.privateRedis = true
		srv, addr, err := startRedis(ctx, dir)
		if err != nil {
			return nil, err
		}
		defer srv.stop(5 * time.Second)
		o.redisAddr = addr
		r.redisNote = "a private redis-server started for this run on " + addr
	}
	b.rdb = redis.NewClient(&redis.Options{Addr: o.redisAddr})
	defer b.rdb.Close()
	b.bull = redis.NewClient(&redis.Options{Addr: o.redisAddr, DB: bullDB})
	defer b.bull.Close()
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("drainbench: redis %s: %w (start it: bash deploy/local/services.sh up)", o.redisAddr, err)
	}
	if o.parts["accuracy"] || o.parts["throughput"] || o.parts["tenants"] {
		logf("building cmd/drainer")
		if b.bin, err = buildDrainer(ctx, o.root, dir); err != nil {
			return nil, err
		}
		if o.systems["bullmq"] && (o.parts["accuracy"] || o.parts["throughput"]) {
			if r.bullmq, err = ensureBullMQ(ctx, o.root); err != nil {
				return nil, err
			}
		}
		if b.sink, err = startSink(b.rec); err != nil {
			return nil, err
		}
		defer b.sink.close()
	}
	r.machine = machineInfo(ctx, b.rdb, firstNonEmpty(r.bullmq, "not run"), r.redisNote)

	if o.parts["accuracy"] {
		b.accuracyPart(ctx, r)
	}
	if o.parts["throughput"] && ctx.Err() == nil {
		b.throughputPart(ctx, r)
	}
	if o.parts["tenants"] && ctx.Err() == nil {
		b.tenantsPart(ctx, r)
	}
	if ctx.Err() != nil {
		return r, nil // interrupted: report the rows that ran
	}
	if o.parts["hol"] {
		logf("head-of-line benchmarks")
		r.hol, r.holCommand, r.holErr = headOfLine(ctx, o)
	}
	return r, nil
}

// accuracyPart runs the accuracy rows (accCases: for each rate and worker
// count, BullMQ's row and one of sluice per backend). It stops early when
// ctx is done.
func (b *bench) accuracyPart(ctx context.Context, r *report) {
	for _, c := range accCases(b.o) {
		b.logf("accuracy: %s %s, %g jobs/s, %d workers, %s", c.system, c.backend, c.rate, c.workers, b.o.warmup+b.o.duration)
		row := b.runAcc(ctx, c)
		b.logf("  %d jobs in window, %.3f jobs/s (%+.2f %%), max 1 s %d, err %v", row.res.Jobs, row.res.Rate, row.res.ErrPct, row.res.MaxWindow, row.err)
		r.acc = append(r.acc, row)
		if ctx.Err() != nil {
			return
		}
	}
}

// failed reports whether any row or part failed to run (a missed goal is
// not a failure).
func (r *report) failed() bool {
	for _, a := range r.acc {
		if a.err != nil {
			return true
		}
	}
	for _, t := range r.tput {
		if t.err != nil {
			return true
		}
	}
	for _, t := range r.ten {
		if t.err != nil {
			return true
		}
	}
	return r.holErr != nil
}
