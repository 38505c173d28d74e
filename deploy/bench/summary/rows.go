package main

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// row is one line of the summary table. Figures the run did not produce
// read notRun; a row without a goal reads "—" in goal and met.
type row struct {
	what, sluice, peer, ratio, goal, met string
}

const notRun = "not run"

// inputs is everything one `make bench` run left for the summary; drain is
// nil when drainbench did not run.
type inputs struct {
	bench benches
	kafka kafkaPerf
	drain *drainresult.Report
}

// allocsBefore is the ingest's allocations per request before issue 11's
// work, requirement 4's base: BenchmarkIngest/redis at d7b8cec (the
// commit the before-figures of docs/perf.md §1.4 were measured at) with
// today's load generator, which allocates nothing per request, so the
// figure is the server's alone (docs/perf.md step 30). The 223 was
// measured with net/http's client, which adds about 90 of its own.
const allocsBefore = 185

// rows builds the table: every ratio of issue 11, in the order.
func (in inputs) rows() []row {
	var out []row
	out = append(out, in.admissionRows()...)
	out = append(out, in.ingestRows()...)
	out = append(out, in.drainRows()...)
	out = append(out, in.tenantsRows()...)
	out = append(out, in.commandRows()...)
	return append(out, in.accuracyRows()...)
}

// ratioRow compares s with p: ratio s ÷ p, met when pass(ratio).
func ratioRow(what string, s, p float64, ok bool, format, goal string, pass func(float64) bool) row {
	r := row{what: what, sluice: notRun, peer: notRun, ratio: notRun, goal: goal, met: notRun}
	if !ok || p == 0 {
		return r
	}
	r.sluice, r.peer = fmt.Sprintf(format, s), fmt.Sprintf(format, p)
	ratio := s / p
	r.ratio = fmt.Sprintf("%.2f×", ratio)
	r.met = "—"
	if pass != nil {
		r.met = yesNo(pass(ratio))
	}
	return r
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

func atLeast(x float64) func(float64) bool { return func(r float64) bool { return r >= x } }
func below(x float64) func(float64) bool   { return func(r float64) bool { return r < x } }

// pair returns unit's value for benchmarks s and p, ok when both have one.
func (b benches) pair(s, p, unit string) (float64, float64, bool) {
	vs, okS := b.get(s, unit)
	vp, okP := b.get(p, unit)
	return vs, vp, okS && okP
}

// pairedRow is ratioRow of s's and p's medians of unit, whose ratio, when
// both ran the same rounds (make bench runs go test BENCH_COUNT times,
// each run taking them in turn), is the median of the rounds' ratios, with
// the number of rounds.
func (b benches) pairedRow(what, s, p, unit, format, goal string, met func(float64) bool) row {
	vs, vp, ok := b.pair(s, p, unit)
	r := ratioRow(what, vs, vp, ok, format, goal, met)
	ss, ps := b[s][unit], b[p][unit]
	if !ok || len(ss) < 2 || len(ss) != len(ps) {
		return r
	}
	ratios := make([]float64, 0, len(ss))
	for i := range ss {
		if ps[i] <= 0 {
			return r
		}
		ratios = append(ratios, ss[i]/ps[i])
	}
	x := drainresult.Median(ratios)
	r.ratio = fmt.Sprintf("%.2f× (%d rounds)", x, len(ratios))
	if met != nil {
		r.met = yesNo(met(x))
	}
	return r
}

func (in inputs) admissionRows() []row {
	b := in.bench
	const vs = "BenchmarkAdmitVsRedisRate"
	s, okS := b.get(vs, "sluice_decisions/s")
	p, okP := b.get(vs, "redis_rate_decisions/s")
	ok := okS && okP
	r := ratioRow("admission: GCRA decisions/s, 64 goroutines, vs redis_rate (median of paired rounds)", s, p, ok, "%.0f", "≥ 1.8×", atLeast(1.8))
	if x, okX := b.get(vs, "x_redis_rate"); okX && r.met != notRun {
		r.ratio, r.met = fmt.Sprintf("%.2f×", x), yesNo(x >= 1.8) // the median of the rounds' ratios
	}
	out := []row{r}
	for _, q := range []string{"p50_us", "p99_us"} {
		s, p, ok := b.pair("BenchmarkAdmitLatency/sluice", "BenchmarkAdmitLatency/redis_rate", q)
		out = append(out, ratioRow("admission: "+strings.TrimSuffix(q, "_us")+" decision latency at half of peak, µs, vs redis_rate", s, p, ok, "%.0f", "stated", nil))
	}
	return out
}

func (in inputs) ingestRows() []row {
	b := in.bench
	const sl, peer, kafka = "BenchmarkIngest/redis", "BenchmarkIngest/peer_handwritten", "BenchmarkIngest/kafka"
	out := []row{
		b.pairedRow("ingest, Redis backend, 32 clients: jobs/s vs the hand-written peer", sl, peer, "jobs/s", "%.0f", "≥ 1.3×", atLeast(1.3)),
		b.pairedRow("ingest: Redis CPU per 202, µs, vs the hand-written peer", sl, peer, "redis_cpu_us", "%.1f", "< 1× (less)", below(1)),
	}
	a, okA := b.get(sl, "allocs/op")
	r := ratioRow("ingest: allocations per request (the server's) vs before (d7b8cec)", a, allocsBefore, okA, "%.0f", "≤ 0.5× (≤ 92.5)", func(x float64) bool { return x <= 0.5 })
	out = append(out, r)
	out = append(out, b.pairedRow("ingest: Kafka backend jobs/s vs the Redis backend's", kafka, sl, "jobs/s", "%.0f", "≥ 0.7×", atLeast(0.7)),
		b.pairedRow("ingest: Kafka backend Redis CPU per 202 (admission and the post-ack write), µs, vs the Redis backend's", kafka, sl, "redis_cpu_us", "%.1f", "stated", nil))
	k := in.kafka
	r = ratioRow("Kafka enqueue, acks=all: records/s vs kafka-producer-perf-test (p99 ms in brackets)", k.sluice, k.kafka, k.ok, "%.0f", "≥ 0.8×", atLeast(0.8))
	if k.ok {
		r.sluice += p99Note(k.sluiceP99)
		r.peer += p99Note(k.kafkaP99)
	}
	out = append(out, r)
	r = ratioRow("Kafka enqueue without the post-ack Redis write (the produce path alone): records/s vs kafka-producer-perf-test", k.bare, k.kafka, k.bareOK && k.ok, "%.0f", "stated", nil)
	if k.bareOK && k.ok {
		r.sluice += p99Note(k.bareP99)
		r.peer += p99Note(k.kafkaP99)
	}
	return append(out, r)
}

func p99Note(ms float64) string {
	if ms == 0 {
		return " (p99 not printed)"
	}
	return fmt.Sprintf(" (%g)", ms)
}
