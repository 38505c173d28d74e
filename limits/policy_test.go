package limits

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAlgorithmKnown(t *testing.T) {
	t.Parallel()
	for _, a := range Algorithms {
		if !a.known() {
			t.Errorf("%q not known", a)
		}
	}
	for _, s := range []Algorithm{"", "GCRA", "leaky_bucket", "token-bucket"} {
		if s.known() {
			t.Errorf("%q known, want unknown", s)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	ok := Policy{Name: "type.encode", Algorithm: AlgGCRA, Limit: 10, Period: time.Second}
	with := func(f func(*Policy)) Policy { p := ok; f(&p); return p }
	cases := []struct {
		name string
		p    Policy
		want string // "" = valid
	}{
		{"valid", ok, ""},
		{"burst", with(func(p *Policy) { p.Burst = 50 }), ""},
		{"window ignores burst", with(func(p *Policy) { p.Algorithm, p.Burst = AlgFixedWindow, 7 }), ""},
		{"name", with(func(p *Policy) { p.Name = "a b" }), "name: must be"},
		{"empty name", with(func(p *Policy) { p.Name = "" }), "name: must be"},
		{"algorithm", with(func(p *Policy) { p.Algorithm = "leaky" }), "algorithm"},
		{"limit", with(func(p *Policy) { p.Limit = 0 }), "limit: must be >= 1 (got 0)"},
		{"period", with(func(p *Policy) { p.Period = 500 * time.Microsecond }), "period: must be >= 1ms (got 500µs)"},
		{"rate", with(func(p *Policy) { p.Limit = 2_000_000 }), "limit: must be <= 1000000, one unit per µs of period 1s (got 2000000)"},
		{"negative burst", with(func(p *Policy) { p.Burst = -1 }), "burst: must be >= 0 (got -1)"},
		{"token bucket 2^53", with(func(p *Policy) { p.Algorithm, p.Burst, p.Period = AlgTokenBucket, 1e9, 24*time.Hour }), "burst: must be <= 104249: burst × period (86400000000 µs) must stay below 2^53 (got 1000000000)"},
		{"sliding 2^53", with(func(p *Policy) { p.Algorithm, p.Limit, p.Period = AlgSlidingWindow, 1e9, 24*time.Hour }), "limit: must be <= 104249: limit × period"},
		{"period cap", with(func(p *Policy) { p.Period = MaxPeriod + time.Millisecond }), "period: must be <= 8784h0m0s (366 days)"},
		{"log cap", with(func(p *Policy) { p.Algorithm, p.Limit = AlgSlidingLog, MaxLogLimit+1 }), "limit: must be <= 10000 for sliding_log"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Validate(%+v) = %v, want nil", c.p, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Validate(%+v) = %v, want an error containing %q", c.p, err, c.want)
			}
		})
	}
}

func TestPolicyCapacity(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    Policy
		want int64
	}{
		{Policy{Algorithm: AlgGCRA, Limit: 10}, 10},
		{Policy{Algorithm: AlgGCRA, Limit: 10, Burst: 3}, 3},
		{Policy{Algorithm: AlgTokenBucket, Limit: 10, Burst: 30}, 30},
		{Policy{Algorithm: AlgFixedWindow, Limit: 10, Burst: 30}, 10},
		{Policy{Algorithm: AlgSlidingLog, Limit: 10}, 10},
	} {
		if got := c.p.Capacity(); got != c.want {
			t.Errorf("%+v.Capacity() = %d, want %d", c.p, got, c.want)
		}
	}
}

// TestLocalAtFixedInstants: the in-process GCRA, 2 per second (T = 500ms),
// burst 4 (τ = 2s).
func TestLocalAtFixedInstants(t *testing.T) {
	t.Parallel()
	p := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 2, Period: time.Second, Burst: 4}
	l := NewLocal(p)
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	steps := []struct {
		at   time.Duration
		n    int64
		want Result
	}{
		{0, 3, Result{Allowed: true, Limit: 4, Remaining: 1, ResetAfter: 1500 * ms}},
		{0, 2, Result{Allowed: false, Limit: 4, Remaining: 1, RetryAfter: 500 * ms, ResetAfter: 1500 * ms}},
		{500 * ms, 2, Result{Allowed: true, Limit: 4, Remaining: 0, ResetAfter: 2000 * ms}},
		{500 * ms, 5, Result{Allowed: false, Limit: 4, Remaining: 0, RetryAfter: Never, ResetAfter: 2000 * ms}},
		{400 * ms, 1, Result{Allowed: false, Limit: 4, Remaining: 0, RetryAfter: 600 * ms, ResetAfter: 2100 * ms}}, // an earlier now: TAT stays
		{10 * time.Second, 0, Result{Allowed: true, Limit: 4, Remaining: 3, ResetAfter: 500 * ms}},                 // 0 means 1; full again
	}
	for i, s := range steps {
		want := s.want
		want.Policy = "tenant"
		if diff := cmp.Diff(want, l.AllowN(t0.Add(s.at), s.n)); diff != "" {
			t.Errorf("step %d (%d at +%v) (-want +got):\n%s", i, s.n, s.at, diff)
		}
	}
}

// TestLocalConcurrent: 1,000 concurrent callers at one instant take exactly
// the burst.
func TestLocalConcurrent(t *testing.T) {
	t.Parallel()
	l := NewLocal(Policy{Name: "tenant", Algorithm: AlgFixedWindow, Limit: 100, Period: time.Minute})
	now := time.Unix(1000, 0)
	var (
		mu sync.Mutex
		n  int
		wg sync.WaitGroup
	)
	for range 1000 {
		wg.Go(func() {
			if l.AllowN(now, 1).Allowed {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n != 100 {
		t.Errorf("admitted %d, want 100", n)
	}
}

// TestLocalMatchesRedisGCRA runs the Redis GCRA table of admTables through
// Local: the in-process fallback gives the same answers.
func TestLocalMatchesRedisGCRA(t *testing.T) {
	t.Parallel()
	for _, c := range admTables {
		if c.p.Algorithm != AlgGCRA {
			continue
		}
		l := NewLocal(c.p)
		for i, st := range c.steps {
			want := st.want
			want.Policy = c.p.Name
			if diff := cmp.Diff(want, l.AllowN(admAt(st.at), st.cost)); diff != "" {
				t.Errorf("step %d (cost %d at +%vs) (-want +got):\n%s", i, st.cost, st.at, diff)
			}
		}
	}
}
