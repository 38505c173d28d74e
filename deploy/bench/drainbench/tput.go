package main

import (
	"context"
	"fmt"
	"slices"
)

// tputCase is one throughput row to run: its system, backend, consumer
// (sink), worker processes and tenants, and which round of it this is.
type tputCase struct {
	system  string // sluice | bullmq
	backend string // redis | kafka (BullMQ: redis)
	sink    string // http | handler (sluice); http | noop (BullMQ)
	workers int
	tenants int // BullMQ: 1 (one queue)
	round   int // from 1
}

// row starts the row's result with the case's settings and jobs jobs.
func (c tputCase) row(jobs int) tputRow {
	return tputRow{system: c.system, backend: c.backend, sink: c.sink, workers: c.workers, tenants: c.tenants, round: c.round, jobs: jobs}
}

// name is the case's unique stem for tenants, topics, queues and files:
// prefix, the consumer and backend, workers, tenants and round.
func (c tputCase) name(prefix string) string {
	return fmt.Sprintf("%s-tput-%s-%s-n%d-t%d-r%d", prefix, c.sink, c.backend, c.workers, c.tenants, c.round)
}

// tputOrder is one round of the throughput rows with workers processes, in
// the order they run: sluice's rows (for each tenant count and backend, HTTP
// then the Go Handler) with BullMQ's two (no-op, then HTTP) in their
// middle, so that a drift of the shared machine across the round weighs on
// BullMQ's rows about as much as on sluice's. Even rounds run sluice's rows
// in the reverse order (the last tenant count first), so that a drift
// across a round does not always weigh on the same tenant count: the
// 12-vs-1 ratio compares rows at the two ends of a round.
func tputOrder(o *options, workers, round int) []tputCase {
	var sl, bull []tputCase
	if o.systems["sluice"] {
		for _, t := range o.tputTenants {
			for _, be := range keysOf(o.backends) {
				for _, sink := range []string{"http", "handler"} {
					sl = append(sl, tputCase{system: "sluice", backend: be, sink: sink, workers: workers, tenants: t, round: round})
				}
			}
		}
	}
	if o.systems["bullmq"] {
		for _, sink := range []string{"noop", "http"} {
			bull = append(bull, tputCase{system: "bullmq", backend: "redis", sink: sink, workers: workers, tenants: 1, round: round})
		}
	}
	if round%2 == 0 {
		slices.Reverse(sl)
	}
	mid := (len(sl) + 1) / 2
	out := append([]tputCase{}, sl[:mid]...)
	out = append(out, bull...)
	return append(out, sl[mid:]...)
}

// throughputPart runs the throughput rows: for each worker count,
// o.tputRounds rounds of tputOrder. It stops early when ctx is done.
func (b *bench) throughputPart(ctx context.Context, r *report) {
	for _, n := range b.o.tputWorkers {
		for round := 1; round <= b.o.tputRounds; round++ {
			for _, c := range tputOrder(b.o, n, round) {
				row := b.runTput(ctx, c)
				b.logf("throughput round %d/%d: %s %s %s, %d workers, %d tenants: %.0f jobs/s (%d arrivals), err %v %s",
					round, b.o.tputRounds, row.system, row.backend, row.sink, row.workers, row.tenants, row.res.Rate, row.res.Jobs, row.err, row.skipped)
				r.tput = append(r.tput, row)
				if ctx.Err() != nil {
					return
				}
			}
		}
	}
}

// runTput runs one case with the row function of its system and consumer.
func (b *bench) runTput(ctx context.Context, c tputCase) tputRow {
	switch {
	case c.system == "bullmq":
		return b.bullThroughput(ctx, c)
	case c.sink == "handler":
		return b.handlerThroughput(ctx, c)
	default:
		return b.sluiceThroughput(ctx, c)
	}
}
