package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// tenantsScenario is drainbench's tenants scenario name ("active" or
// "configured"), its runs merged (drainresult.ScenarioOf), ok when the run
// has it.
func (in inputs) tenantsScenario(name string) (drainresult.Tenants, bool) {
	if in.drain == nil {
		return drainresult.Tenants{}, false
	}
	return drainresult.ScenarioOf(in.drain.Tenants, name)
}

// tenantsRows: requirement 3's rows from drainbench's tenants part: A's
// aggregate and worst tenant against their goals, B's figures against A's
// (drainresult.TenantsCompare), and the stated figures: drainer RSS and
// goroutines in A and B, Redis memory and commands/s per idle tenant.
// Names carry the run's tenant counts (issue 11's 2,000 and 10,000 when
// the part did not run).
func (in inputs) tenantsRows() []row {
	a, okA := in.tenantsScenario("active")
	b, okB := in.tenantsScenario("configured")
	active, configured := 2000, 10000
	if okA {
		active = a.Active
	}
	if okB {
		configured = b.Configured
	}
	na, nc := thousands(active), thousands(configured)
	empty := func(what, goal string) row {
		return row{what: what, sluice: notRun, peer: "—", ratio: "—", goal: goal, met: notRun}
	}
	agg := empty(na+" tenants × 1 job/s: aggregate jobs/s", fmt.Sprintf("%d (within %g %%)", active, float64(drainresult.TenantsGoalPct)))
	worst := empty(na+" tenants × 1 job/s: worst tenant's rate error", fmt.Sprintf("≤ %g %%, every tenant", float64(drainresult.TenantsGoalPct)))
	if okA {
		agg.sluice, agg.ratio, agg.met = fmt.Sprintf("%.1f", a.Aggregate), fmt.Sprintf("%.3f×", a.Aggregate/float64(active)/a.Rate), yesNo(a.AggregateMet())
		worst.sluice, worst.met = fmt.Sprintf("%.2f %% (%d of %d over, %d without a rate)", a.WorstErrPct, a.Over, a.Active, a.Failed), yesNo(a.WorstMet())
		if a.Err != "" {
			agg.sluice, agg.ratio, worst.sluice = "failed", "—", "failed"
		}
	}
	out := []row{agg, worst, in.tenantsCompareRow(nc, na)}
	rss := empty(fmt.Sprintf("tenants: drainer RSS max, MB, %s active / %s configured", na, nc), "stated")
	gor := empty(fmt.Sprintf("tenants: drainer goroutines, %s active / %s configured", na, nc), "stated")
	if okA && okB {
		rss.sluice, rss.met = fmt.Sprintf("%.1f / %.1f", float64(a.RSSMax)/1e6, float64(b.RSSMax)/1e6), "—"
		gor.sluice, gor.met = fmt.Sprintf("%.0f / %.0f", a.Goroutines, b.Goroutines), "—"
	}
	mem := empty("tenants: Redis memory per idle tenant, bytes", "stated")
	cmds := empty("tenants: Redis commands/s per idle tenant", "stated")
	if c := in.tenantsCompare(); c != nil {
		mem.sluice, mem.met = fmt.Sprintf("%.0f", c.MemoryPerIdle), "—"
		cmds.sluice, cmds.met = fmt.Sprintf("%.3f", c.CmdsPerIdle), "—"
	}
	return append(out, rss, gor, mem, cmds)
}

// tenantsCompareRow: B's figures against A's, met when each is within 10 %
// (drainresult.CompareTenants); the missed ones are named.
func (in inputs) tenantsCompareRow(nc, na string) row {
	r := row{what: fmt.Sprintf("%s configured / %s active vs %s: each figure within 10 %%", nc, na, na), sluice: notRun, peer: "—", ratio: "—",
		goal: "each B ÷ A within 10 % (worst error: B ≤ max(1.1 × A, 1 %))", met: notRun}
	c := in.tenantsCompare()
	if c == nil {
		return r
	}
	var cells, missed []string
	for _, x := range c.Ratios {
		cells = append(cells, fmt.Sprintf("%s %.2f×", x.Figure, x.Ratio))
		if !x.Within {
			missed = append(missed, x.Figure)
		}
	}
	r.sluice, r.met = strings.Join(cells, ", "), yesNo(c.Met)
	if len(missed) > 0 {
		r.met += " (" + strings.Join(missed, ", ") + ")"
	}
	return r
}

// tenantsCompare is the run's TenantsCompare, nil when there is none.
func (in inputs) tenantsCompare() *drainresult.TenantsCompare {
	if in.drain == nil {
		return nil
	}
	return in.drain.TenantsCompare
}

// thousands is n with a comma every three digits: 10000 → "10,000".
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
