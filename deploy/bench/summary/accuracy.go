package main

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// costCell renders Redis commands per job and, in brackets, script calls.
func costCell(cmds, scripts float64) string { return fmt.Sprintf("%.1f (%.2f)", cmds, scripts) }

// costRow compares sluice's Redis commands and script calls per delivered
// job with BullMQ's: met when sluice makes ≤ 2 script calls and fewer
// commands.
func costRow(what string, sc, ss, pc, ps float64, ok bool) row {
	r := row{what: what, sluice: notRun, peer: notRun, ratio: notRun, goal: "≤ 2 calls, < 1× cmds", met: notRun}
	if !ok || pc == 0 || sc == 0 {
		return r
	}
	r.sluice, r.peer = costCell(sc, ss), costCell(pc, ps)
	r.ratio = fmt.Sprintf("%.2f×", sc/pc)
	r.met = yesNo(ss <= 2 && sc < pc)
	return r
}

// commandRows: Redis commands (script calls) per delivered job, unthrottled
// (cmd/drainer over HTTP, 1 tenant, against BullMQ's HTTP worker: each the
// median over the drain rounds) and at 100 and 1000 jobs/s (the accuracy
// rows), each with the same worker count.
func (in inputs) commandRows() []row {
	var out []row
	for _, be := range []string{"redis", "kafka"} {
		for _, n := range []int{1, 3} {
			s, okS := in.median(drainKey{"sluice", be, "http", n, 1})
			p, okP := in.median(drainKey{"bullmq", "", "http", n, 0})
			out = append(out, costRow(fmt.Sprintf("Redis cmds (script calls) per job, %s, unthrottled, %d drainer(s), vs BullMQ", be, n),
				s.Cmds, s.Scripts, p.Cmds, p.Scripts, okS && okP && s.Cmds > 0))
		}
	}
	for _, be := range []string{"redis", "kafka"} {
		for _, rate := range []float64{100, 1000} {
			for _, n := range []int{1, 3, 8} {
				s, okS := in.acc("sluice", be, rate, n)
				p, okP := in.acc("bullmq", "redis", rate, n)
				if !okS && !okP && n == 8 {
					continue // the quick subset has no 8-drainer rows; the full matrix does
				}
				out = append(out, costRow(fmt.Sprintf("Redis cmds (script calls) per job, %s, %g jobs/s, %d drainer(s), vs BullMQ", be, rate, n),
					s.Cmds, s.Scripts, p.Cmds, p.Scripts, okS && okP && s.Cmds > 0))
			}
		}
	}
	return out
}

// accBackend is an accuracy row's backend: files written before the field
// held one have only Redis rows.
func accBackend(a drainresult.Accuracy) string {
	if a.Backend == "" {
		return "redis"
	}
	return a.Backend
}

// acc finds the accuracy row of system on backend at rate with n workers.
func (in inputs) acc(system, backend string, rate float64, n int) (drainresult.Accuracy, bool) {
	if in.drain != nil {
		for _, a := range in.drain.Accuracy {
			if a.System == system && accBackend(a) == backend && a.Rate == rate && a.Workers == n && a.Err == "" && a.Jobs > 0 {
				return a, true
			}
		}
	}
	return drainresult.Accuracy{}, false
}

// worst is the accuracy row of system on backend with the largest measure,
// how many rows it was chosen from and whether there was any.
func (in inputs) worst(system, backend string, measure func(drainresult.Accuracy) float64) (drainresult.Accuracy, int, bool) {
	var w drainresult.Accuracy
	n := 0
	if in.drain == nil {
		return w, 0, false
	}
	for _, a := range in.drain.Accuracy {
		if a.System != system || accBackend(a) != backend || a.Err != "" || a.Jobs == 0 {
			continue
		}
		if n == 0 || measure(a) > measure(w) {
			w = a
		}
		n++
	}
	return w, n, n > 0
}

// accuracyRows: for each of requirement 5's bounds and each backend, the
// worst sluice accuracy row of the run on that backend, judged against the
// bound, BullMQ's worst (Redis) beside it.
func (in inputs) accuracyRows() []row {
	type bound struct {
		what, goal string
		measure    func(drainresult.Accuracy) float64
		cell       func(drainresult.Accuracy) string
		pass       func(drainresult.Accuracy) bool
	}
	bounds := []bound{
		{"outflow error, worst row", "within ±0.1 %",
			func(a drainresult.Accuracy) float64 { return math.Abs(a.ErrPct) },
			func(a drainresult.Accuracy) string { return fmt.Sprintf("%+.2f %%", a.ErrPct) },
			func(a drainresult.Accuracy) bool { return math.Abs(a.ErrPct) <= 0.1 }},
		{"inter-dispatch gap SD (by send time), worst row", "≤ 2 ms",
			func(a drainresult.Accuracy) float64 { return dispatchGapSD(a) },
			func(a drainresult.Accuracy) string { return fmt.Sprintf("%.2f ms", dispatchGapSD(a)) },
			func(a drainresult.Accuracy) bool { return dispatchGapSD(a) <= 2 }},
		{"gap SD of the arrivals at the sink, worst row", "stated",
			func(a drainresult.Accuracy) float64 { return a.GapSDMs },
			func(a drainresult.Accuracy) string { return fmt.Sprintf("%.2f ms", a.GapSDMs) },
			nil},
		{"most deliveries sent in a 1-s window ÷ (rate + capacity), worst row", "≤ 1",
			func(a drainresult.Accuracy) float64 { return float64(sentOrArrived(a)) / (a.Rate + a.Capacity) },
			func(a drainresult.Accuracy) string { return windowCell(sentOrArrived(a), a) },
			func(a drainresult.Accuracy) bool { return float64(sentOrArrived(a)) <= a.Rate+a.Capacity }},
		{"most arrivals at the sink in a 1-s window ÷ (rate + capacity), worst row", "stated",
			func(a drainresult.Accuracy) float64 { return float64(a.MaxWindow) / (a.Rate + a.Capacity) },
			func(a drainresult.Accuracy) string { return windowCell(a.MaxWindow, a) },
			nil},
	}
	var out []row
	for _, b := range bounds {
		peer := notRun
		if p, _, okP := in.worst("bullmq", "redis", b.measure); okP {
			peer = b.cell(p) + fmt.Sprintf(" (%g/s × %d)", p.Rate, p.Workers)
		}
		for _, be := range []string{"redis", "kafka"} {
			r := row{what: "accuracy, " + be + ": " + b.what, sluice: notRun, peer: peer, ratio: "—", goal: b.goal, met: notRun}
			if s, n, ok := in.worst("sluice", be, b.measure); ok {
				r.what += fmt.Sprintf(" of %d (here %g/s × %d)", n, s.Rate, s.Workers)
				r.sluice, r.met = b.cell(s), "—"
				if b.pass != nil {
					r.met = yesNo(b.pass(s))
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// sentOrArrived is an accuracy row's most deliveries in 1 s by send time
// (Sluice-Sent-At: what the throttle let go), or at the sink when the file
// predates the send times.
func sentOrArrived(a drainresult.Accuracy) int {
	if a.MaxSent > 0 {
		return a.MaxSent
	}
	return a.MaxWindow
}

// windowCell renders n deliveries in 1 s against the row's bound.
func windowCell(n int, a drainresult.Accuracy) string {
	return fmt.Sprintf("%d of %g (%.2f)", n, a.Rate+a.Capacity, float64(n)/(a.Rate+a.Capacity))
}

// dispatchGapSD is an accuracy row's inter-dispatch gap SD in ms: by send
// time, or at the sink when the file predates the send times.
func dispatchGapSD(a drainresult.Accuracy) float64 {
	if a.MaxSent > 0 {
		return a.GapSDSentMs
	}
	return a.GapSDMs
}
