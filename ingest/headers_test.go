package ingest

import (
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/limits"
)

func TestPolicyItem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    limits.Policy
		want string
	}{
		{"per second", limits.Policy{Name: "tenant", Limit: 10, Period: time.Second}, `"tenant";q=10;w=1`},
		{"per minute", limits.Policy{Name: "type.encode", Limit: 2, Period: time.Minute}, `"type.encode";q=2;w=60`},
		{"sub-second window rounds up to 1", limits.Policy{Name: "tenant", Limit: 5, Period: 100 * time.Millisecond}, `"tenant";q=5;w=1`},
		{"fractional seconds round up", limits.Policy{Name: "tenant", Limit: 5, Period: 1500 * time.Millisecond}, `"tenant";q=5;w=2`},
		{"gcra burst above limit", limits.Policy{Name: "tenant", Algorithm: limits.AlgGCRA, Limit: 2, Period: time.Second, Burst: 3}, `"tenant";q=2;w=1;sluice-burst=3`},
		{"gcra burst equal to limit", limits.Policy{Name: "tenant", Algorithm: limits.AlgGCRA, Limit: 2, Period: time.Second, Burst: 2}, `"tenant";q=2;w=1`},
		{"window ignores burst", limits.Policy{Name: "tenant", Algorithm: limits.AlgFixedWindow, Limit: 2, Period: time.Second, Burst: 9}, `"tenant";q=2;w=1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policyItem(tt.p); got != tt.want {
				t.Errorf("policyItem() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestStateHeaders(t *testing.T) {
	t.Parallel()
	tenant := limits.Result{Policy: "tenant", Allowed: true, Limit: 10, Remaining: 3, ResetAfter: 700 * time.Millisecond}
	encode := limits.Result{Policy: "type.encode", Allowed: true, Limit: 2, Remaining: 1, ResetAfter: 30 * time.Second}
	tests := []struct {
		name     string
		results  []limits.Result
		violated string
		want     http.Header
	}{
		{
			name:    "one policy",
			results: []limits.Result{tenant},
			want: http.Header{
				"Ratelimit":             {`"tenant";r=3;t=1`},
				"X-Ratelimit-Limit":     {"10"},
				"X-Ratelimit-Remaining": {"3"},
				"X-Ratelimit-Reset":     {"1"},
			},
		},
		{
			name:    "X- fields follow the least remaining",
			results: []limits.Result{tenant, encode},
			want: http.Header{
				"Ratelimit":             {`"tenant";r=3;t=1, "type.encode";r=1;t=30`},
				"X-Ratelimit-Limit":     {"2"},
				"X-Ratelimit-Remaining": {"1"},
				"X-Ratelimit-Reset":     {"30"},
			},
		},
		{
			name:     "X- fields follow the violated policy",
			results:  []limits.Result{{Policy: "tenant", Limit: 10, Remaining: 0, RetryAfter: 100 * time.Millisecond, ResetAfter: time.Second}, encode},
			violated: "tenant",
			want: http.Header{
				"Ratelimit":             {`"tenant";r=0;t=1, "type.encode";r=1;t=30`},
				"X-Ratelimit-Limit":     {"10"},
				"X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset":     {"1"},
			},
		},
		{
			name:    "ties go to the later reset",
			results: []limits.Result{{Policy: "a", Limit: 5, Remaining: 1, ResetAfter: time.Second}, {Policy: "b", Limit: 9, Remaining: 1, ResetAfter: 3 * time.Second}},
			want: http.Header{
				"Ratelimit":             {`"a";r=1;t=1, "b";r=1;t=3`},
				"X-Ratelimit-Limit":     {"9"},
				"X-Ratelimit-Remaining": {"1"},
				"X-Ratelimit-Reset":     {"3"},
			},
		},
		{name: "no policies, no headers", want: http.Header{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := http.Header{}
			setStateHeaders(got, tt.results, tt.violated)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Duration
		want int64
	}{
		{0, 1},
		{-time.Second, 1},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{90 * time.Second, 90},
	}
	for _, tt := range tests {
		if got := retryAfterSeconds(tt.in); got != tt.want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestNewJobIDSortsByTime(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var ids []string
	seen := map[string]bool{}
	for i := range 1000 {
		id := newJobID(base.Add(time.Duration(i) * time.Millisecond))
		if len(id) != 32 {
			t.Fatalf("newJobID() = %q, want 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("newJobID() repeated %s", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if !sort.StringsAreSorted(ids) {
		t.Errorf("ids of increasing milliseconds are not sorted")
	}
}

func BenchmarkSetStateHeaders(b *testing.B) {
	results := []limits.Result{
		{Policy: "tenant", Allowed: true, Limit: 10, Remaining: 3, ResetAfter: 700 * time.Millisecond},
		{Policy: "type.encode", Allowed: true, Limit: 2, Remaining: 1, ResetAfter: 30 * time.Second},
	}
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		setStateHeaders(h, results, "")
	}
}
