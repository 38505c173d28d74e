package main

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// throughputSection renders the throughput rows: one line per row with its
// medians over the rounds (drainresult.Medians) and the rounds' figures.
func (r *report) throughputSection(b *strings.Builder) {
	b.WriteString("## Throughput\n\n")
	fmt.Fprintf(b, "%d jobs pre-loaded per row, no outflow limit (sluice) and no limiter (BullMQ); jobs/s = (jobs − 1) ÷ (last arrival − first arrival). "+
		"Consumers: http = sluice's HTTP sink or a BullMQ processor POSTing each job to the measuring server (a trivial 204 handler); "+
		"handler = sluice's Go Handler embedding (drainer.Drainer instances inside the harness, one Redis client each); "+
		"noop = a BullMQ processor that only records the time. sluice tenants share the jobs round-robin (Kafka: key = tenant, %d partitions); "+
		"BullMQ uses one queue, concurrency %d per worker, and removes a finished job at once (removeOnComplete), where sluice keeps its state record and done listing. "+
		"sluice's Kafka http rows start their cmd/drainer processes with every tenant paused and resume them (a config rewrite) once the consumer group is Stable with every member holding partitions "+
		"(the note says how long that took): the group's forming, a start-up cost of about 1 s per joining member, is not draining; "+
		"the jobs wait on the topic meanwhile as BullMQ's wait in its list.\n\n",
		r.o.tputJobs, kafkaPartitions, r.o.bullConcurrency)
	fmt.Fprintf(b, "Rounds: the rows of each worker count ran %d round(s), alternated: every round runs each row once, "+
		"sluice's rows (for each tenant count and backend, http then handler; even rounds in the reverse order, 12 tenants first) with BullMQ's two (noop, then http) in their middle, "+
		"so a drift of the shared machine weighs on both systems and on both tenant counts. jobs/s = the median over the rounds that ran (their figures in the next column, in round order); "+
		"vs BullMQ = the median of the per-round ratios jobs/s ÷ BullMQ's in the same round with the same workers (http vs http, handler vs noop), "+
		"vs 1 tenant = the same against the same backend, consumer and workers with 1 tenant (the rounds' ratios in brackets); "+
		"Redis cmds/job = the median over the rounds, counted as above (%s); dups = over all rounds.\n\n",
		r.o.tputRounds, r.cmdsScope())
	b.WriteString("| system | backend | consumer | workers | tenants | jobs | rounds | jobs/s | rounds' jobs/s | dups | Redis cmds/job (scripts) | vs BullMQ | vs 1 tenant | note |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|---|\n")
	for _, m := range drainresult.Medians(r.tputResults()) {
		rows := r.roundsOf(m)
		note, dups, skipped := roundNotes(rows)
		if skipped != "" && len(m.Rates) == 0 {
			fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %d | 0 of %d | skipped |||||| %s |\n",
				m.System, m.Backend, m.Consumer, m.Workers, m.Tenants, m.Jobs, len(rows), oneLine(skipped))
			continue
		}
		rate := "failed"
		if len(m.Rates) > 0 {
			rate = fmt.Sprintf("%.0f", m.Rate)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %d | %d of %d | %s | %s | %d | %s | %s | %s | %s |\n",
			m.System, m.Backend, m.Consumer, m.Workers, m.Tenants, m.Jobs, len(m.Rates), len(rows), rate,
			joinFloats(m.Rates, "%.0f"), dups, calls{all: m.Cmds, scripts: m.Scripts}, ratioCell(m.VsBull, m.VsBullRounds),
			ratioCell(m.VsOne, m.VsOneRounds), oneLine(note))
	}
	b.WriteString("\n")
}

// roundsOf is m's row in every round, in run order.
func (r *report) roundsOf(m drainresult.TputMedian) []tputRow {
	var out []tputRow
	for _, t := range r.tput {
		if t.system == m.System && t.backend == m.Backend && t.sink == m.Consumer && t.workers == m.Workers && t.tenants == m.Tenants {
			out = append(out, t)
		}
	}
	return out
}

// roundNotes joins the rounds' notes and failures ("round 2: ..."), sums
// their duplicates and returns the first round's reason for a skip.
func roundNotes(rows []tputRow) (note string, dups int, skipped string) {
	var notes []string
	for _, t := range rows {
		dups += t.res.Dups
		if t.skipped != "" {
			skipped = firstNonEmpty(skipped, t.skipped)
			continue
		}
		n := t.note
		if t.err != nil {
			n = strings.TrimPrefix(n+"; ", "; ") + "failed: " + t.err.Error()
		}
		if t.res.Jobs != t.jobs && t.err == nil {
			n = strings.TrimPrefix(n+"; ", "; ") + fmt.Sprintf("%d arrivals for %d jobs", t.res.Jobs, t.jobs)
		}
		if n != "" {
			notes = append(notes, fmt.Sprintf("round %d: %s", t.round, n))
		}
	}
	if skipped != "" && len(notes) > 0 {
		notes = append(notes, "skipped: "+skipped)
	}
	return strings.Join(notes, "; "), dups, skipped
}

// ratioCell is "median× (round, round, ...)", "" without rounds.
func ratioCell(median float64, rounds []float64) string {
	if len(rounds) == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f× (%s)", median, joinFloats(rounds, "%.2f"))
}

func joinFloats(vs []float64, format string) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf(format, v)
	}
	return strings.Join(s, ", ")
}
