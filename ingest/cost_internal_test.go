package ingest

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/limits"
)

// TestJobCostBound is the table of the one rule for the most one job may
// cost: the least of ingest.max_job_cost, each policy's Capacity and, when
// the outflow is shaped, ⌊the outflow bucket's capacity⌋.
func TestJobCostBound(t *testing.T) {
	t.Parallel()
	gcra := &limits.Policy{Name: "tenant", Algorithm: limits.AlgGCRA, Limit: 10, Period: time.Second, Burst: 20}
	window := &limits.Policy{Name: "type.enc", Algorithm: limits.AlgFixedWindow, Limit: 7, Period: time.Minute, Burst: 99}
	cases := []struct {
		name     string
		max      int64
		outflow  config.Outflow
		policies []*limits.Policy
		want     costBound
	}{
		{"default max_job_cost", 0, config.Outflow{}, nil, costBound{max: config.DefaultMaxJobCost}},
		{"max_job_cost", 50, config.Outflow{}, nil, costBound{max: 50}},
		{"max_job_cost above its bound is clamped", math.MaxInt64, config.Outflow{}, nil, costBound{max: config.MaxMaxJobCost}},
		{"no policy (nil)", 50, config.Outflow{}, []*limits.Policy{nil}, costBound{max: 50}},
		{"gcra: burst", 50, config.Outflow{}, []*limits.Policy{gcra}, costBound{max: 20, policy: "tenant"}},
		{"gcra above max_job_cost", 15, config.Outflow{}, []*limits.Policy{gcra}, costBound{max: 15}},
		{"fixed window: limit, not burst", 50, config.Outflow{}, []*limits.Policy{gcra, window}, costBound{max: 7, policy: "type.enc"}},
		{"outflow capacity", 50, config.Outflow{Rate: 2, Capacity: 5}, []*limits.Policy{gcra}, costBound{max: 5, outflow: true}},
		{"outflow capacity floored", 50, config.Outflow{Rate: 2, Capacity: 5.9}, nil, costBound{max: 5, outflow: true}},
		{"outflow capacity default max(1, rate)", 50, config.Outflow{Rate: 3.5}, nil, costBound{max: 3, outflow: true}},
		{"outflow capacity default 1", 50, config.Outflow{Rate: 0.01}, nil, costBound{max: 1, outflow: true}},
		{"outflow capacity above the policy's", 50, config.Outflow{Rate: 100}, []*limits.Policy{gcra}, costBound{max: 20, policy: "tenant"}},
		{"outflow capacity huge", 50, config.Outflow{Rate: 1, Capacity: 1e300}, nil, costBound{max: 50}},
		{"unshaped outflow: capacity ignored", 50, config.Outflow{Capacity: 2}, nil, costBound{max: 50}},
		{"NaN rate is not shaped", 50, config.Outflow{Rate: math.NaN(), Capacity: 2}, nil, costBound{max: 50}},
	}
	for _, c := range cases {
		got := jobCostBound(c.max, c.outflow, c.policies...)
		if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(costBound{})); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestChargeOfNeverWraps: with any costs, chargeOf either refuses or gives
// sums that are exact and within limits.MaxCost, and it refuses at the
// first job that breaks a bound.
func TestChargeOfNeverWraps(t *testing.T) {
	t.Parallel()
	p := limits.Policy{Name: "tenant", Algorithm: limits.AlgFixedWindow, Limit: 100, Period: time.Minute}
	ts := newTenantState("acme", config.Tenant{}, nil, config.MaxMaxJobCost)
	ts.tenantOnly = []limits.Policy{p} // as newTenantState would set them, with the bound left at max_job_cost
	ts.tenantPolicy = &ts.tenantOnly[0]
	jobs := func(costs ...int64) []job {
		out := make([]job, len(costs))
		for i, c := range costs {
			out[i] = job{typ: "t", cost: c, field: "jobs[" + strconv.Itoa(i) + "]"}
		}
		return out
	}
	cases := []struct {
		costs []int64
		field string // "" when admitted
		total int64
	}{
		{[]int64{math.MaxInt64, math.MaxInt64, 3}, "jobs[0].cost", 0},
		{[]int64{math.MaxInt64, 2}, "jobs[0].cost", 0},
		{[]int64{60, 40}, "", 100},
		{[]int64{60, 41}, "jobs[1].cost", 0},
		{[]int64{1, 0}, "jobs[1].cost", 0},
		{[]int64{1, -5}, "jobs[1].cost", 0},
	}
	for _, c := range cases {
		ch, prob := chargeOf(ts, jobs(c.costs...))
		field := ""
		if prob != nil {
			field = prob.Field
		}
		if field != c.field || ch.total != c.total {
			t.Errorf("chargeOf(%v) = total %d, field %q; want %d, %q", c.costs, ch.total, field, c.total, c.field)
		}
		if prob == nil && (len(ch.costs) != 1 || ch.costs[0] != ch.total) {
			t.Errorf("chargeOf(%v): costs %v, want [%d]", c.costs, ch.costs, ch.total)
		}
		if prob != nil && (ch.costs != nil || ch.total != 0 || len(ch.policies) != 1) {
			t.Errorf("chargeOf(%v) refused but left costs %v, total %d, policies %d", c.costs, ch.costs, ch.total, len(ch.policies))
		}
	}
}

// TestBacklogRetryAfter: ⌈backlog ÷ rate⌉, at least 1, capped at
// maxRetryAfter whatever the numbers.
func TestBacklogRetryAfter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		backlog int64
		rate    float64
		want    int64
	}{
		{5, 2, 3},
		{0, 2, 1},
		{-7, 2, 1},
		{4, 2, 2},
		{1, 1e-300, maxRetryAfter},
		{math.MaxInt64, 0.001, maxRetryAfter},
		{math.MaxInt64, math.Inf(1), 1},
		{10, math.NaN(), maxRetryAfter},
	}
	for _, c := range cases {
		if got := backlogRetryAfter(c.backlog, c.rate); got != c.want {
			t.Errorf("backlogRetryAfter(%d, %g) = %d, want %d", c.backlog, c.rate, got, c.want)
		}
	}
}

// TestCeilSeconds: rounding up never overflows.
func TestCeilSeconds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{1500 * time.Millisecond, 2},
		{math.MaxInt64, int64(math.MaxInt64/time.Second) + 1},
		{limits.Never, 0},
	}
	for _, c := range cases {
		if got := ceilSeconds(c.d); got != c.want {
			t.Errorf("ceilSeconds(%d) = %d, want %d", c.d, got, c.want)
		}
	}
}

// TestComputeStatsStoredNumbers: stored values that are missing, malformed,
// non-finite or beyond int64 give an answer that encodes as JSON, with
// counts clamped, never wrapped.
func TestComputeStatsStoredNumbers(t *testing.T) {
	t.Parallel()
	// now_us, backlog, override_rate, override_capacity, water_micro, ts_us,
	// eff, eff_ts_us, eff_inc, in_flight, dead_letters, units_in_window
	res := []string{"1000000", "1e30", "inf", "NaN", "9.2e24", "", "-inf", "x", "", "-3", "99999999999999999999", "1e400"}
	got := computeStats("acme", config.Outflow{Rate: 2}, res)
	if _, err := json.Marshal(got); err != nil {
		t.Fatalf("the answer does not encode: %v (%+v)", err, got)
	}
	if got.Backlog != math.MaxInt64 || got.InFlight != 0 || got.DLQ != math.MaxInt64 {
		t.Errorf("backlog, in_flight, dlq = %d, %d, %d; want MaxInt64, 0, MaxInt64", got.Backlog, got.InFlight, got.DLQ)
	}
	if got.Outflow.ConfiguredRate != 2 || got.Outflow.Capacity != 2 || got.Outflow.MeasuredRate != 0 {
		t.Errorf("outflow = %+v, want the configured rate 2 and capacity 2 (non-finite overrides ignored)", got.Outflow)
	}
	tiny := computeStats("acme", config.Outflow{Rate: 5e-324}, []string{"0", "1000", "", "", "", "", "", "", "", "", "", ""})
	if _, err := json.Marshal(tiny); err != nil || tiny.ETASeconds != nil {
		t.Errorf("backlog ÷ a subnormal rate: eta %v (%v), want null and an encodable answer", tiny.ETASeconds, err)
	}
}
