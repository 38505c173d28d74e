package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// report is everything one run measured, rendered as markdown.
type report struct {
	o          *options
	command    string
	started    time.Time
	elapsed    time.Duration
	machine    []string
	bullmq     string
	acc        []accRow
	tput       []tputRow
	ten        []tenRow
	hol        []holRow
	holCommand string
	holErr     error
	loadStart  string
	redisNote  string
	loadEnd    string
	logDir     string
}

// machineInfo describes the machine and the software the run used.
func machineInfo(ctx context.Context, rdb *redis.Client, bullmq, redisNote string) []string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := strings.TrimSpace(cmdOut(ctx, "uname", "-sr"))
	redisVersion := "unknown"
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				redisVersion = v
			}
		}
	}
	return []string{
		fmt.Sprintf("%d CPUs (nproc; %s), %s", runtime.NumCPU(), cpu, kernel),
		fmt.Sprintf("%s (the harness and cmd/drainer), Node.js %s, bullmq %s",
			strings.TrimSpace(cmdOut(ctx, "go", "env", "GOVERSION")), strings.TrimSpace(cmdOut(ctx, "node", "--version")), bullmq),
		fmt.Sprintf("Redis %s, %s, for both systems (sluice db 0, BullMQ db %d)", redisVersion, redisNote, bullDB),
	}
}

func cmdOut(ctx context.Context, name string, args ...string) string {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return string(out)
}

// loadavg is /proc/loadavg's first three fields.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// markdown renders the report.
func (r *report) markdown() string {
	var b strings.Builder
	o := r.o
	mode := "full matrix"
	switch {
	case o.quick:
		mode = "quick subset"
	case o.selected():
		mode = "selected rows"
	}
	fmt.Fprintf(&b, "# sluice drain benchmarks (%s)\n\n", mode)
	fmt.Fprintf(&b, "Run %s, %s. Command: `%s`\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"), r.elapsed.Round(time.Second), r.command)
	b.WriteString("Machine:\n\n")
	for _, m := range r.machine {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	fmt.Fprintf(&b, "- load average (1, 5, 15 min) at start %s, at end %s; the machine is shared, so figures are noisy\n\n", r.loadStart, r.loadEnd)
	if len(r.acc) > 0 {
		r.accuracySection(&b)
	}
	if len(r.tput) > 0 {
		r.throughputSection(&b)
	}
	if len(r.ten) > 0 {
		r.tenantsSection(&b)
	}
	if o.parts["hol"] {
		r.holSection(&b)
	}
	return b.String()
}

func (r *report) accuracySection(b *strings.Builder) {
	o := r.o
	b.WriteString("## Accuracy\n\n")
	fmt.Fprintf(b, "Each row pre-loads enough jobs for one tenant (sluice) or one queue (BullMQ), starts the worker processes and measures at the sink. "+
		"The %s steady window opens %s after the first arrival; for sluice not before its bucket is full (arrivals ≥ rate × time since the first + capacity), "+
		"as an idle bucket's start-up burst would otherwise count as rate (warm-up s says when it opened). "+
		"sluice: cmd/drainer processes, one row per backend (Redis lists; Kafka: %d partitions, a topic and consumer group of the row's own; its drainers start paused and resume once the group is Stable with every member holding partitions, "+
		"so no member's join pauses the group inside the window), `outflow.rate` = target, `outflow.capacity` left at its default max(1, rate), "+
		"HTTP sink to the measuring server. BullMQ %s: `limiter: {max: rate × %s, duration: %d}`, concurrency %d per worker, "+
		"the processor POSTs each job to the same measuring server.\n\n",
		o.duration, o.warmup, kafkaPartitions, r.bullmq, o.bullWindow, o.bullWindow.Milliseconds(), o.bullConcurrency)
	b.WriteString("Achieved = least-squares slope of arrivals over time in the steady window; max 1 s = most deliveries in any sliding 1-s window over the whole row, " +
		"start-up burst included, against the bound rate + capacity: first by the time each was sent (its Sluice-Sent-At header, the worker's clock as the job left it: " +
		"what the throttle let go, which the goal judges), then by its arrival at the sink, where the spread of the delivery latency adds a few jobs to a window " +
		"when the first jobs of the start-up burst take longer to arrive than those a second later (the goal column then says how long the burst took to arrive); " +
		"steady = arrivals in 1 s within the steady window; " +
		"gaps = time between consecutive arrivals in the steady window (ideal 1/rate, SD 0), the SD also by send time (the inter-dispatch gaps, which the summary judges); " +
		"Redis cmds/job = server-wide INFO commandstats delta ÷ jobs, commands inside scripts included, and in brackets the script calls (EVALSHA...) alone, " +
		"which are most of the round trips (" + r.cmdsScope() + "). Goal: |error| ≤ 1 %, max 1 s ≤ bound.\n\n")
	b.WriteString("| system | backend | target /s | workers | capacity | warm-up s | jobs in window | achieved /s | error % | max 1 s sent / at sink (bound) | steady | gap mean ms | gap SD ms sent / at sink | gap p99 ms | dups | Redis cmds/job (scripts) | goal |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, a := range r.acc {
		bound := a.rate + a.capacity
		if a.err != nil && a.res.Jobs == 0 {
			fmt.Fprintf(b, "| %s | %s | %g | %d | %g | failed: %s |||||||||||\n", a.system, a.backend, a.rate, a.workers, a.capacity, oneLine(a.err.Error()))
			continue
		}
		goal := "ok"
		var miss []string
		if math.Abs(a.res.ErrPct) > 1 {
			miss = append(miss, fmt.Sprintf("error %+.2f %%", a.res.ErrPct))
		}
		miss = append(miss, windowMiss(a, bound)...)
		if a.err != nil {
			miss = append(miss, "failed: "+oneLine(a.err.Error()))
		}
		if len(miss) > 0 {
			goal = "MISS: " + strings.Join(miss, ", ")
		} else if float64(a.res.MaxWindow) > bound {
			goal = "ok (" + sinkSpread(a, bound) + ")"
		}
		fmt.Fprintf(b, "| %s | %s | %g | %d | %g | %.1f | %d | %.2f | %+.2f | %s / %d (%g) | %d | %.2f | %s / %.2f | %.2f | %d | %s | %s |\n",
			a.system, a.backend, a.rate, a.workers, a.capacity, a.res.Warmup.Seconds(), a.res.Jobs, a.res.Rate, a.res.ErrPct, sentCell(a.res.MaxSent), a.res.MaxWindow, bound, a.res.MaxSteady,
			ms(a.res.GapMean), sentGapCell(a.res), ms(a.res.GapSD), ms(a.res.GapP99), a.res.Dups, a.cmds, goal)
	}
	b.WriteString("\n")
	r.notes(b, func(yield func(string, string) bool) {
		for _, a := range r.acc {
			if a.note != "" && !yield(fmt.Sprintf("%s %s rate %g × %d", a.system, a.backend, a.rate, a.workers), a.note) {
				return
			}
		}
	})
}

func (r *report) holSection(b *strings.Builder) {
	b.WriteString("## Head-of-line (requirement 3)\n\n")
	fmt.Fprintf(b, "`%s`: tenant A holds a 100,000-job backlog drained at 10 jobs/s while tenant B submits one job every 10 ms; "+
		"B's delay from enqueue to the sink.\n\n", r.holCommand)
	if len(r.hol) > 0 {
		b.WriteString("| benchmark | tenant B jobs | p50 ms | p99 ms |\n|---|--:|--:|--:|\n")
		for _, h := range r.hol {
			fmt.Fprintf(b, "| %s | %d | %.2f | %.2f |\n", h.name, h.jobs, h.p50, h.p99)
		}
		b.WriteString("\n")
	}
	if r.holErr != nil {
		fmt.Fprintf(b, "Failed: %s\n\n", oneLine(r.holErr.Error()))
	}
}

// notes lists (row, text) pairs under a section, when there are any.
func (r *report) notes(b *strings.Builder, seq func(func(string, string) bool)) {
	first := true
	for row, text := range seq {
		if first {
			b.WriteString("Notes:\n\n")
			first = false
		}
		fmt.Fprintf(b, "- %s: %s\n", row, oneLine(text))
	}
	if !first {
		b.WriteString("\n")
	}
}

// cmdsScope says how exact the per-job command counts are.
func (r *report) cmdsScope() string {
	if strings.HasPrefix(r.redisNote, "a private") {
		return "exact: only this run uses its private server"
	}
	return "approximate: other clients of the shared server count too"
}

// String renders per-job counts as "all (scripts)".
func (c calls) String() string {
	if c.all == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f (%.1f)", c.all, c.scripts)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// oneLine makes s safe inside a markdown table cell.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// windowMiss is the row's 1-s window miss, if any: judged on the send
// times (what the throttle let go) when every arrival had one, else on
// the arrivals at the sink.
func windowMiss(a accRow, bound float64) []string {
	if a.res.MaxSent > 0 {
		if float64(a.res.MaxSent) > bound {
			return []string{fmt.Sprintf("1 s window of sends %d > %g", a.res.MaxSent, bound)}
		}
		return nil
	}
	if float64(a.res.MaxWindow) > bound {
		return []string{sinkSpread(a, bound)}
	}
	return nil
}

// sinkSpread says where the most arrivals in 1 s at the sink passed bound.
func sinkSpread(a accRow, bound float64) string {
	m := fmt.Sprintf("1 s window at the sink %d > %g", a.res.MaxWindow, bound)
	if a.res.MaxAt < time.Second && a.res.BurstSpread > 0 {
		return m + fmt.Sprintf(" at start-up (the first %g jobs reached the sink over %.0f ms)", a.capacity, ms(a.res.BurstSpread))
	}
	return m + fmt.Sprintf(" from %.2f s after the first arrival", a.res.MaxAt.Seconds())
}

// sentGapCell is SentGapSD in ms, "—" when not measured.
func sentGapCell(a accuracy) string {
	if a.MaxSent == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", ms(a.SentGapSD))
}

// sentCell is MaxSent, "—" when not measured.
func sentCell(n int) string {
	if n == 0 {
		return "—"
	}
	return strconv.Itoa(n)
}

// write saves the markdown as <dir>/<timestamp>.md and, for a full run,
// as <dir>/latest.md too; it returns the timestamped path.
func (r *report) write(md string) (string, error) {
	if err := os.MkdirAll(r.o.outDir, 0o755); err != nil {
		return "", fmt.Errorf("drainbench: results dir: %w", err)
	}
	path := filepath.Join(r.o.outDir, r.started.UTC().Format("20060102T150405Z")+".md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		return "", fmt.Errorf("drainbench: write %s: %w", path, err)
	}
	if !r.o.quick {
		if err := os.WriteFile(filepath.Join(r.o.outDir, "latest.md"), []byte(md), 0o644); err != nil {
			return "", fmt.Errorf("drainbench: write latest.md: %w", err)
		}
	}
	return path, nil
}
