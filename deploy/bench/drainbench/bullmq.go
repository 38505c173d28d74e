package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BullMQ's keys live in their own Redis database under their own prefix, on
// the same server as sluice's (bench.mjs reads the same two settings).
const (
	bullDB     = 1
	bullPrefix = "bench-bull"
)

// bullDir is the Node package of the BullMQ peer.
func bullDir(root string) string { return filepath.Join(root, "deploy", "bench", "bullmq") }

// ensureBullMQ installs the pinned packages (npm ci) when node_modules has
// no bullmq, and returns the installed bullmq version.
func ensureBullMQ(ctx context.Context, root string) (string, error) {
	dir := bullDir(root)
	pkg := filepath.Join(dir, "node_modules", "bullmq", "package.json")
	if _, err := os.Stat(pkg); err != nil {
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("drainbench: npm ci in %s: %w: %s", dir, err, out)
		}
	}
	b, err := os.ReadFile(pkg)
	if err != nil {
		return "", fmt.Errorf("drainbench: bullmq version: %w", err)
	}
	var v struct{ Version string }
	if err := json.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("drainbench: bullmq version: %w", err)
	}
	return v.Version, nil
}

// bullEnv is the environment bench.mjs reads.
func (b *bench) bullEnv() []string {
	return []string{"BENCH_REDIS=" + b.o.redisAddr, "BENCH_REDIS_DB=" + strconv.Itoa(bullDB), "BENCH_BULLMQ_PREFIX=" + bullPrefix}
}

// bullLoad adds n jobs to BullMQ queue q (addBulk, 1000 per call).
func (b *bench) bullLoad(ctx context.Context, q string, n int) error {
	cmd := exec.CommandContext(ctx, "node", "bench.mjs", "load", "--queue", q, "--jobs", strconv.Itoa(n))
	cmd.Dir = bullDir(b.o.root)
	cmd.Env = append(os.Environ(), b.bullEnv()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("drainbench: bullmq load %d jobs: %w: %s", n, err, out)
	}
	return nil
}

// limiter is BullMQ's {max, duration}.
type limiter struct {
	max    int
	window time.Duration
}

// bullWorkers starts n worker processes on q with b.o.bullConcurrency, the
// limiter when not nil, posting to sinkURL when not empty.
func (b *bench) bullWorkers(ctx context.Context, q string, n int, lim *limiter, sinkURL string) (fleet, error) {
	var f fleet
	for i := range n {
		argv := []string{"node", filepath.Join(bullDir(b.o.root), "bench.mjs"), "work", "--queue", q,
			"--concurrency", strconv.Itoa(b.o.bullConcurrency), "--out", b.bullOut(q, i)}
		if lim != nil {
			argv = append(argv, "--max", strconv.Itoa(lim.max), "--duration", strconv.FormatInt(lim.window.Milliseconds(), 10))
		}
		if sinkURL != "" {
			argv = append(argv, "--sink", sinkURL)
		}
		p, err := startProc(fmt.Sprintf("bullmq worker %d of %s", i, q), filepath.Join(b.dir, fmt.Sprintf("%s-%d.log", q, i)), b.bullEnv(), argv...)
		if err != nil {
			f.stop(5 * time.Second)
			return nil, err
		}
		f = append(f, p)
	}
	return f, nil
}

// bullOut is worker i's timestamp file.
func (b *bench) bullOut(q string, i int) string {
	return filepath.Join(b.dir, fmt.Sprintf("%s-%d.times", q, i))
}

// bullThroughput is one throughput row of BullMQ: no limiter, c.workers
// processes, a no-op processor (c.sink "noop": its own timestamps) or one
// that POSTs to the sink ("http").
func (b *bench) bullThroughput(ctx context.Context, c tputCase) tputRow {
	row, mode, workers := c.row(b.o.tputJobs), c.sink, c.workers
	row.conc = b.o.bullConcurrency
	q := c.name(b.runID)
	defer deletePattern(context.WithoutCancel(ctx), b.bull, bullPrefix+":"+q+":*")
	if row.err = b.bullLoad(ctx, q, row.jobs); row.err != nil {
		return row
	}
	b.rec.take()
	cnt := startCounter(ctx, b.rdb)
	url := ""
	if mode == "http" {
		url = b.sink.url
	}
	f, err := b.bullWorkers(ctx, q, workers, nil, url)
	if err != nil {
		row.err = err
		return row
	}
	var waitErr error
	if mode == "http" {
		waitErr = b.rec.waitCount(ctx, row.jobs, tputTimeout(row.jobs), f.failed)
	} else {
		waitErr = b.bullDrained(ctx, q, tputTimeout(row.jobs), f.failed)
	}
	stopErr := f.stop(20 * time.Second)
	arr := b.rec.take()
	if mode == "noop" {
		var err error
		if arr, err = b.bullTimes(q, workers); err != nil && waitErr == nil {
			waitErr = err
		}
	}
	row.finish(arr, waitErr, stopErr)
	row.cmds = cnt.perJob(ctx, row.res.Jobs)
	if n, err := b.bull.ZCard(ctx, bullPrefix+":"+q+":failed").Result(); err == nil && n > 0 {
		row.note = strings.TrimPrefix(row.note+"; ", "; ") + fmt.Sprintf("%d jobs failed", n)
	}
	return row
}

// bullDrained waits until q has no waiting, active, prioritized, delayed or
// paused job.
func (b *bench) bullDrained(ctx context.Context, q string, timeout time.Duration, failed func() error) error {
	k := bullPrefix + ":" + q + ":"
	deadline := time.Now().Add(timeout)
	for {
		if err := failed(); err != nil {
			return err
		}
		pipe := b.bull.Pipeline()
		cmds := []interface{ Val() int64 }{
			pipe.LLen(ctx, k+"wait"), pipe.LLen(ctx, k+"active"), pipe.LLen(ctx, k+"paused"),
			pipe.ZCard(ctx, k+"prioritized"), pipe.ZCard(ctx, k+"delayed"),
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("drainbench: bullmq queue length: %w", err)
		}
		var left int64
		for _, c := range cmds {
			left += c.Val()
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d bullmq jobs left after %s", left, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// bullTimes reads the workers' timestamp files ("id\tunix ms") into
// arrivals sorted by time.
func (b *bench) bullTimes(q string, workers int) ([]arrival, error) {
	rec := &recorder{}
	for i := range workers {
		f, err := os.Open(b.bullOut(q, i))
		if err != nil {
			return nil, fmt.Errorf("drainbench: bullmq timestamps: %w", err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			id, ms, ok := strings.Cut(sc.Text(), "\t")
			v, err := strconv.ParseFloat(ms, 64)
			if !ok || err != nil {
				f.Close()
				return nil, fmt.Errorf("drainbench: bullmq timestamps %s: bad line %q", f.Name(), sc.Text())
			}
			t := time.UnixMicro(int64(v * 1000))
			rec.add(id, t, t)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("drainbench: bullmq timestamps: %w", err)
		}
	}
	return rec.take(), nil
}
