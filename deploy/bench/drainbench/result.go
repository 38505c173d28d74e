package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// result is the report's machine-readable form (drainresult.Report), for
// deploy/bench/summary.
func (r *report) result() *drainresult.Report {
	out := &drainresult.Report{
		Started: r.started.UTC().Format(time.RFC3339), Quick: r.o.quick, Command: r.command,
		Machine: r.machine, LoadStart: r.loadStart, LoadEnd: r.loadEnd,
		CmdsExact: strings.HasPrefix(r.redisNote, "a private"),
	}
	for _, a := range r.acc {
		row := drainresult.Accuracy{
			System: a.system, Backend: a.backend, Rate: a.rate, Workers: a.workers, Capacity: a.capacity,
			Jobs: a.res.Jobs, Achieved: a.res.Rate, ErrPct: a.res.ErrPct, MaxWindow: a.res.MaxWindow,
			MaxSent: a.res.MaxSent,
			GapSDMs: ms(a.res.GapSD), GapSDSentMs: ms(a.res.SentGapSD), Cmds: a.cmds.all, Scripts: a.cmds.scripts,
		}
		if a.err != nil {
			row.Err = oneLine(a.err.Error())
		}
		out.Accuracy = append(out.Accuracy, row)
	}
	out.Throughput = r.tputResults()
	out.TputRounds, out.TputMedians = r.o.tputRounds, drainresult.Medians(out.Throughput)
	out.Tenants = r.tenResults()
	if c, ok := r.tenCompare(); ok {
		out.TenantsCompare = &c
	}
	return out
}

// tputResults is every throughput row of every round, in run order.
func (r *report) tputResults() []drainresult.Throughput {
	var out []drainresult.Throughput
	for _, t := range r.tput {
		row := drainresult.Throughput{
			Round: t.round, System: t.system, Backend: t.backend, Consumer: t.sink, Workers: t.workers, Tenants: t.tenants,
			Jobs: t.jobs, Rate: t.res.Rate, Cmds: t.cmds.all, Scripts: t.cmds.scripts, Skipped: t.skipped,
		}
		if t.err != nil {
			row.Err = oneLine(t.err.Error())
		}
		out = append(out, row)
	}
	return out
}

// writeJSON saves the result next to the markdown report (<dir>/<timestamp>.json)
// and, when BENCH_JSON names a file, there too; it returns the paths.
func (r *report) writeJSON() ([]string, error) {
	res := r.result()
	paths := []string{filepath.Join(r.o.outDir, r.started.UTC().Format("20060102T150405Z")+".json")}
	if r.o.jsonPath != "" {
		paths = append(paths, r.o.jsonPath)
	}
	for _, p := range paths {
		if err := drainresult.Write(p, res); err != nil {
			return nil, fmt.Errorf("drainbench: %w", err)
		}
	}
	return paths, nil
}
