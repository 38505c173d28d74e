package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// tenRow is one scenario of the tenants part: its figures (the JSON row),
// a note on what went wrong without spoiling the figures, and a failure.
type tenRow struct {
	res  drainresult.Tenants
	note string
	err  error
}

// tenantsRate is each active tenant's outflow.rate in the tenants part,
// jobs/s (outflow.capacity left at its default, 1).
const tenantsRate = 1.0

// tenantsPart runs scenario A ("active": o.tenActive tenants, each with a
// backlog) and B ("configured": o.tenConfigured tenants, the same number
// active, the rest configured without jobs), each one cmd/drainer process,
// in o.tenRounds rounds: odd rounds A then B, even rounds B then A (a
// drifting host then weighs on both alike; the report merges each
// scenario's runs, drainresult.MergeTenants). It stops early when ctx is
// done.
func (b *bench) tenantsPart(ctx context.Context, r *report) {
	type scenario struct {
		name       string
		configured int
	}
	ab := []scenario{{"active", b.o.tenActive}, {"configured", b.o.tenConfigured}}
	for round := 1; round <= b.o.tenRounds; round++ {
		order := ab
		if round%2 == 0 {
			order = []scenario{ab[1], ab[0]}
		}
		for _, sc := range order {
			b.logf("tenants: round %d of %d, %s, %d configured, %d active at %g job/s, warm-up %s, window %s",
				round, b.o.tenRounds, sc.name, sc.configured, b.o.tenActive, tenantsRate, b.o.tenWarmup, b.o.tenWindow)
			row := b.tenantsScenario(ctx, sc.name, sc.configured, round)
			t := row.res
			b.logf("  ready after %.1fs; %d arrivals in the window, %.1f jobs/s; worst tenant %.2f %% (%d over 1 %%, %d without a rate); "+
				"RSS max %.1f MB, %.0f goroutines, drainer CPU %.1fs; Redis %.1f MB, %.0f cmds/s; err %v %s",
				t.ReadyS, t.Arrivals, t.Aggregate, t.WorstErrPct, t.Over, t.Failed, float64(t.RSSMax)/1e6, t.Goroutines,
				t.DrainerCPUS, float64(t.RedisMemory)/1e6, t.RedisCmdsPerS, row.err, row.note)
			r.ten = append(r.ten, row)
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// tenantsJobs is the jobs each active tenant is pre-loaded with: enough
// for the warm-up and the window at tenantsRate, 20 % and 5 jobs more.
func (o *options) tenantsJobs() int {
	return int(tenantsRate*(o.tenWarmup+o.tenWindow).Seconds()*1.2) + 5
}

// tenantsScenario runs one scenario: pre-load the active tenants (the
// first o.tenActive of the configured ones), start the drainer, wait until
// /readyz answers and the first job arrives, wait the warm-up, measure the
// window (tenantsWindow), stop the drainer and delete the tenants' keys.
func (b *bench) tenantsScenario(ctx context.Context, scenario string, configured, round int) tenRow {
	o := b.o
	row := tenRow{res: drainresult.Tenants{Scenario: scenario, Configured: configured, Active: o.tenActive, Rate: tenantsRate,
		WindowS: o.tenWindow.Seconds(), WarmupS: o.tenWarmup.Seconds(), Goroutines: -1, Round: round}}
	base := fmt.Sprintf("bench-%s-ten-%s-r%d", b.runID, scenario, round)
	names := tenantNames(base, configured)
	active := names[:o.tenActive]
	defer b.cleanTenants(context.WithoutCancel(ctx))
	row.res.Jobs = o.tenantsJobs() * len(active)
	loadStart := time.Now()
	if row.err = preloadRedis(ctx, b.rdb, active, row.res.Jobs); row.err != nil {
		return row
	}
	b.logf("  pre-loaded %d jobs in %s", row.res.Jobs, time.Since(loadStart).Round(100*time.Millisecond))
	b.rec.take()
	start := time.Now()
	f, err := startDrainers(b.bin, b.dir, base, 1, drainerConf{
		redisAddr: o.redisAddr, backend: "redis", tenants: names, rate: tenantsRate, sinkURL: b.sink.url,
		pprof: o.profileDir != "",
	})
	if err != nil {
		row.err = err
		return row
	}
	defer f.stop(20 * time.Second) // a no-op once stopped below
	ready, err := waitReady(ctx, f[0].addr, start, 3*time.Minute, f.failed)
	if err != nil {
		row.err = err
		return row
	}
	row.res.ReadyS = ready.Seconds()
	if err := b.rec.waitCount(ctx, 1, time.Minute, f.failed); err != nil {
		row.err = fmt.Errorf("no job arrived: %w", err)
		return row
	}
	from := b.rec.first().Add(o.tenWarmup)
	if err := waitUntil(from, f.failed); err != nil {
		row.err = fmt.Errorf("the drainer died in the warm-up: %w", err)
		return row
	}
	profiled := b.profileWindow(ctx, f[0].addr, base)
	row.err = b.tenantsWindow(ctx, f[0], from, &row.res)
	row.note = profiled()
	if err := f.stop(20 * time.Second); err != nil {
		row.note = "stop: " + err.Error()
	}
	arr := b.rec.take()
	writeArrivalCounts(filepath.Join(b.dir, base+".counts"), arr, from)
	measureTenants(&row.res, arr, from, o.tenWindow, active, tenantsRate)
	row.res.Dups = duplicates(arr)
	return row
}

// tenantsWindow measures the drainer p and the Redis server over the window
// [from, from + o.tenWindow): RSS once a second (max, and at the end), its
// CPU time, and at the end its go_goroutines, Redis used_memory, and the
// commands/s and CPU seconds of Redis over the window. A figure that cannot
// be read stays 0 (goroutines −1); an error means the drainer died or ctx
// ended.
func (b *bench) tenantsWindow(ctx context.Context, p *proc, from time.Time, res *drainresult.Tenants) error {
	pid, end := p.cmd.Process.Pid, from.Add(b.o.tenWindow)
	cpu0, cpuErr := procCPU(pid)
	calls0, callsOK := commandCalls(ctx, b.rdb)
	rcpu0, rcpuErr := redisInfo(ctx, b.rdb, "cpu", "used_cpu_sys", "used_cpu_user")
	t0 := time.Now()
	for {
		if err := p.exited(); err != nil {
			return fmt.Errorf("the drainer died in the window: %w", err)
		}
		if rss, err := procRSS(pid); err == nil {
			res.RSSMax, res.RSSEnd = max(res.RSSMax, rss), rss
		}
		if !time.Now().Before(end) {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(min(time.Second, time.Until(end)))
	}
	if cpu1, err := procCPU(pid); err == nil && cpuErr == nil {
		res.DrainerCPUS = cpu1 - cpu0
	}
	elapsed := time.Since(t0).Seconds()
	if calls1, ok := commandCalls(ctx, b.rdb); ok && callsOK {
		res.RedisCmdsPerS = (calls1.all - calls0.all) / elapsed
	}
	if rcpu1, err := redisInfo(ctx, b.rdb, "cpu", "used_cpu_sys", "used_cpu_user"); err == nil && rcpuErr == nil {
		res.RedisCPUS = rcpu1[0] + rcpu1[1] - rcpu0[0] - rcpu0[1]
	}
	if mem, err := redisInfo(ctx, b.rdb, "memory", "used_memory"); err == nil {
		res.RedisMemory = int64(mem[0])
	}
	if text, err := scrape(ctx, p.addr, "/metrics"); err == nil {
		if g, ok := parseMetric(text, "go_goroutines"); ok {
			res.Goroutines = g
		}
	}
	return nil
}

// cleanTenants deletes the tenants part's keys: FLUSHDB when the run's
// Redis is its private server, else one SCAN over the part's key pattern
// (never a flush of a shared server). A failure is logged: the figures
// stand.
func (b *bench) cleanTenants(ctx context.Context) {
	var err error
	if b.privateRedis {
		err = b.rdb.FlushDB(ctx).Err()
	} else {
		err = deletePattern(ctx, b.rdb, "sluice:{bench-"+b.runID+"-ten-*")
	}
	if err != nil {
		b.logf("tenants: clean up: %v", err)
	}
}

// writeArrivalCounts writes the arrivals of a scenario per 100 ms, one line
// "offset_s count" from the window's start (negative in the warm-up) into
// path, so a stall of the whole drainer shows as a gap. A diagnostic only:
// a write error is ignored.
func writeArrivalCounts(path string, arr []arrival, from time.Time) {
	counts := map[int64]int{}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, a := range arr {
		k := a.at.Sub(from).Milliseconds() / 100
		if a.at.Before(from) {
			k-- // floor, not truncation toward zero
		}
		counts[k]++
		lo, hi = min(lo, k), max(hi, k)
	}
	var buf bytes.Buffer
	for k := lo; k <= hi && len(arr) > 0; k++ {
		fmt.Fprintf(&buf, "%.1f %d\n", float64(k)/10, counts[k])
	}
	_ = os.WriteFile(path, buf.Bytes(), 0o644)
}

// profileWindow, with BENCH_PROFILE, starts a CPU profile of the tenants
// window of the drainer whose ops listener is addr; the returned func waits
// for it, saves the live heap at the window's end and returns the row's
// note naming both (or what failed). Without BENCH_PROFILE it does nothing.
func (b *bench) profileWindow(ctx context.Context, addr, base string) func() string {
	o := b.o
	if o.profileDir == "" {
		return func() string { return "" }
	}
	wait := startProfile(ctx, addr, o.profileDir, base, int(o.tenWindow.Seconds()))
	return func() string {
		path, err := wait()
		if err != nil {
			return "profile: " + err.Error()
		}
		heap, err := saveHeapProfile(ctx, addr, o.profileDir, base)
		if err != nil {
			return "CPU profile of the window: " + path + "; heap profile: " + err.Error()
		}
		return "CPU profile of the window: " + path + ", heap at its end: " + heap
	}
}
