package main

import (
	"fmt"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// minRounds is issue 11 requirement 2's least number of alternated rounds
// behind a drain ratio.
const minRounds = 3

// drainKey names a drain row: system, backend, consumer, workers and
// tenants (BullMQ rows have one queue on Redis: backend and tenants are
// ignored for them).
type drainKey struct {
	system, backend, consumer string
	workers, tenants          int
}

// median finds drain row k's medians over the rounds (the run's
// drainresult.TputMedians), ok when at least one round of it ran.
func (in inputs) median(k drainKey) (drainresult.TputMedian, bool) {
	if in.drain != nil {
		for _, m := range in.drain.TputMedians {
			if m.System == k.system && m.Consumer == k.consumer && m.Workers == k.workers &&
				(k.system == "bullmq" || (m.Backend == k.backend && m.Tenants == k.tenants)) && len(m.Rates) > 0 {
				return m, true
			}
		}
	}
	return drainresult.TputMedian{}, false
}

// roundsRow states two drain rows' median jobs/s and, as the ratio, the
// median of their per-round ratios: met when it is at least least over at
// least minRounds rounds.
func roundsRow(what string, s, p drainresult.TputMedian, ok bool, ratio float64, rounds []float64, least float64) row {
	goal := fmt.Sprintf("≥ %g×, ≥ %d rounds", least, minRounds)
	r := row{what: what, sluice: notRun, peer: notRun, ratio: notRun, goal: goal, met: notRun}
	if !ok {
		return r
	}
	r.sluice, r.peer = fmt.Sprintf("%.0f", s.Rate), fmt.Sprintf("%.0f", p.Rate)
	if len(rounds) == 0 {
		r.ratio, r.met = "no round with both", "**no**"
		return r
	}
	r.ratio = fmt.Sprintf("%.2f× (%s)", ratio, plural(len(rounds), "round"))
	r.met = yesNo(ratio >= least && len(rounds) >= minRounds)
	if ratio >= least && len(rounds) < minRounds {
		r.met += fmt.Sprintf(" (ratio met over %s; the goal needs %d)", plural(len(rounds), "round"), minRounds)
	}
	return r
}

// drainRows: requirement 2's ratios, each the median of the run's per-round
// ratios: Go Handler vs BullMQ's no-op processor, HTTP vs BullMQ's HTTP
// worker, and 12 tenants vs 1, on both backends with 1 and 3 drainers.
func (in inputs) drainRows() []row {
	var out, tenants []row
	for _, be := range []string{"redis", "kafka"} {
		for _, n := range []int{1, 3} {
			for _, t := range []int{1, 12} {
				for _, c := range []struct{ sl, bull, what string }{
					{"handler", "noop", "Go Handler vs BullMQ no-op"}, {"http", "http", "HTTP vs BullMQ HTTP"},
				} {
					s, okS := in.median(drainKey{"sluice", be, c.sl, n, t})
					p, okP := in.median(drainKey{"bullmq", "", c.bull, n, 0})
					least := 1.5
					if c.sl == "http" {
						least = 1.3
					}
					out = append(out, roundsRow(fmt.Sprintf("drain, %s, %d drainer(s), %d tenant(s): %s, jobs/s (median of alternated rounds)", be, n, t, c.what),
						s, p, okS && okP, s.VsBull, s.VsBullRounds, least))
				}
			}
			for _, c := range []string{"handler", "http"} {
				s, okS := in.median(drainKey{"sluice", be, c, n, 12})
				p, okP := in.median(drainKey{"sluice", be, c, n, 1})
				tenants = append(tenants, roundsRow(fmt.Sprintf("drain, %s, %s, %d drainer(s): 12 tenants vs 1, jobs/s (median of alternated rounds)", be, c, n),
					s, p, okS && okP, s.VsOne, s.VsOneRounds, 0.9))
			}
		}
	}
	return append(out, tenants...)
}

// plural is "1 round", "3 rounds".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
