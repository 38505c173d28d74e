package main

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// tenResults is the tenants part's scenarios as JSON rows, in run order.
func (r *report) tenResults() []drainresult.Tenants {
	var out []drainresult.Tenants
	for _, t := range r.ten {
		row := t.res
		if t.err != nil {
			row.Err = oneLine(t.err.Error())
		}
		out = append(out, row)
	}
	return out
}

// tenCompare is drainresult.CompareTenants of scenario A ("active") and B
// ("configured"), each run's rounds merged, ok when both ran.
func (r *report) tenCompare() (drainresult.TenantsCompare, bool) {
	a, b := r.tenScenario("active"), r.tenScenario("configured")
	if a == nil || b == nil {
		return drainresult.TenantsCompare{}, false
	}
	return drainresult.CompareTenants(*a, *b)
}

// tenLine is one line of the tenants table: a figure in A and B, B ÷ A
// and the goal.
type tenLine struct{ figure, a, b, ratio, goal string }

// tenantsSection renders the tenants part: one column per scenario, one
// line per figure, B's compared figures against A's, then the figures per
// idle tenant.
func (r *report) tenantsSection(b *strings.Builder) {
	o := r.o
	b.WriteString("## Tenants (issue 11 requirement 3)\n\n")
	fmt.Fprintf(b, "One cmd/drainer process, Redis-list backend, HTTP sink to the measuring server. A: %d tenants, each `outflow: {rate: %g}` "+
		"(capacity left at its default, 1) and pre-loaded with %d jobs. B: %d configured tenants with the same settings, %d of them pre-loaded as in A, the rest without jobs. "+
		"The %s window opens %s after the first arrival. Aggregate = arrivals in the window ÷ window; a tenant's rate = (k − 1) ÷ (t_k − t_1) of its k arrivals in the window "+
		"(a count in a fixed window is off by ±1 at its edges); worst tenant = the largest |rate − %g| ÷ %g; a tenant with fewer than 2 arrivals in the window has no rate and counts as over 1 %%. "+
		"Drainer: VmRSS sampled once a second in the window, `go_goroutines` from its /metrics at the window's end (its registry has the Go collector), "+
		"CPU = utime + stime over the window. Redis: `used_memory` at the window's end, INFO commandstats and used_cpu_sys + used_cpu_user deltas over the window (%s). "+
		"Each scenario's keys are deleted after it. Each scenario ran %d time(s), in alternated order (round 1 A then B, round 2 B then A, ...), "+
		"and its column merges its runs (drainresult.MergeTenants): the mean of each cost (drainer CPU, Redis memory, commands/s and CPU), "+
		"the worst of each bound (aggregate, worst tenant, tenants over 1 %%, RSS, goroutines, start), the sum of arrivals and duplicates. "+
		"B ÷ A: goal within 10 %% (for the worst error: B's ≤ max(1.1 × A's, 1 %%)).\n\n",
		o.tenActive, tenantsRate, o.tenantsJobs(), o.tenConfigured, o.tenActive, o.tenWindow, o.tenWarmup, tenantsRate, tenantsRate, r.cmdsScope(), o.tenRounds)
	a, bb := r.tenScenario("active"), r.tenScenario("configured")
	c, cok := r.tenCompare()
	fmt.Fprintf(b, "| figure | A: %d active | B: %d configured, %d active | B ÷ A | goal |\n|---|--:|--:|--:|---|\n", o.tenActive, o.tenConfigured, o.tenActive)
	for _, l := range tenLines(a, bb, c, cok) {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", l.figure, l.a, l.b, l.ratio, l.goal)
	}
	b.WriteString("\n")
	if len(r.ten) > 2 {
		b.WriteString("Each run, in run order (drainer CPU s, Redis CPU s, worst tenant %):")
		for i, t := range r.ten {
			sep := ";"
			if i == 0 {
				sep = ""
			}
			label := map[string]string{"active": "A", "configured": "B"}[t.res.Scenario]
			fmt.Fprintf(b, "%s %s round %d: %.1f, %.1f, %.3f", sep, label, t.res.Round, t.res.DrainerCPUS, t.res.RedisCPUS, t.res.WorstErrPct)
		}
		b.WriteString(".\n\n")
	}
	if cok {
		fmt.Fprintf(b, "Per idle tenant ((B − A) ÷ %d idle): Redis memory %.0f bytes, Redis commands %.3f /s. B's figures within 10 %% of A's: %s.\n\n",
			c.Idle, c.MemoryPerIdle, c.CmdsPerIdle, metOrNot(c.Met))
	}
	r.notes(b, func(yield func(string, string) bool) {
		for _, t := range r.ten {
			if t.err != nil && !yield(t.res.Scenario, "failed: "+t.err.Error()) {
				return
			}
			if t.note != "" && !yield(t.res.Scenario, t.note) {
				return
			}
		}
	})
}

// tenScenario is the scenario's runs merged (drainresult.ScenarioOf), nil
// when it did not run.
func (r *report) tenScenario(name string) *drainresult.Tenants {
	t, ok := drainresult.ScenarioOf(r.tenResults(), name)
	if !ok {
		return nil
	}
	return &t
}

// tenLines is the tenants table: for each figure A's and B's value (empty
// for a scenario that did not run), the ratio for the compared figures.
func tenLines(a, b *drainresult.Tenants, c drainresult.TenantsCompare, cok bool) []tenLine {
	cell := func(t *drainresult.Tenants, f func(drainresult.Tenants) string) string {
		if t == nil {
			return "not run"
		}
		return f(*t)
	}
	ratio := func(i int) string {
		if !cok || i >= len(c.Ratios) {
			return ""
		}
		return fmt.Sprintf("%.2f× %s", c.Ratios[i].Ratio, okMiss(c.Ratios[i].Within))
	}
	mb := func(n int64) string { return fmt.Sprintf("%.1f", float64(n)/1e6) }
	line := func(figure string, f func(drainresult.Tenants) string, ratioCell, goal string) tenLine {
		return tenLine{figure, cell(a, f), cell(b, f), ratioCell, goal}
	}
	return []tenLine{
		line("drainer ready after, s (first 200 on /readyz)", func(t drainresult.Tenants) string { return fmt.Sprintf("%.1f", t.ReadyS) }, "", ""),
		line("arrivals in the window", func(t drainresult.Tenants) string { return fmt.Sprint(t.Arrivals) }, "", ""),
		line("aggregate jobs/s", func(t drainresult.Tenants) string {
			return fmt.Sprintf("%.1f %s", t.Aggregate, okMiss(t.AggregateMet()))
		}, ratio(0),
			"active × 1 job/s within 1 %; B ÷ A within 10 %"),
		line("worst tenant's rate error % (tenant)", func(t drainresult.Tenants) string {
			return fmt.Sprintf("%.3f (%s) %s", t.WorstErrPct, t.WorstTenant, okMiss(t.WorstMet()))
		}, ratio(1), "≤ 1 %, every tenant; B ≤ max(1.1 × A, 1 %)"),
		line("tenants over 1 % (of them without a rate)", func(t drainresult.Tenants) string { return fmt.Sprintf("%d (%d)", t.Over, t.Failed) }, "", "0"),
		line("arrivals of one tenant in the window, min / max", func(t drainresult.Tenants) string { return fmt.Sprintf("%d / %d", t.CountMin, t.CountMax) }, "", ""),
		line("duplicate arrivals (whole scenario)", func(t drainresult.Tenants) string { return fmt.Sprint(t.Dups) }, "", ""),
		line("drainer RSS, MB: max / at the end", func(t drainresult.Tenants) string { return mb(t.RSSMax) + " / " + mb(t.RSSEnd) }, ratio(2), "stated; B ÷ A within 10 %"),
		line("drainer goroutines at the end", func(t drainresult.Tenants) string { return fmt.Sprintf("%.0f", t.Goroutines) }, ratio(3), "stated; B ÷ A within 10 %"),
		line("drainer CPU s over the window (% of a core)", func(t drainresult.Tenants) string {
			return fmt.Sprintf("%.1f (%.0f %%)", t.DrainerCPUS, 100*t.DrainerCPUS/t.WindowS)
		}, ratio(4), "stated; B ÷ A within 10 %"),
		line("Redis used_memory at the end, MB", func(t drainresult.Tenants) string { return mb(t.RedisMemory) }, "", "stated"),
		line("Redis commands/s in the window", func(t drainresult.Tenants) string { return fmt.Sprintf("%.0f", t.RedisCmdsPerS) }, "", "stated"),
		line("Redis CPU s over the window", func(t drainresult.Tenants) string { return fmt.Sprintf("%.1f", t.RedisCPUS) }, "", "stated"),
	}
}

func okMiss(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISS"
}

func metOrNot(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
