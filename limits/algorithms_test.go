package limits

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

type admStep struct {
	at   float64 // seconds after admBase
	cost int64
	want Result // Policy is filled in
}

// admSec is a second, for the tables.
const admSec = time.Second

// admTables are requests at explicit instants and their expected results,
// per algorithm. Every algorithm has Limit 3 (and Burst 3); the windows are
// 10 s, GCRA and the token bucket refill one unit per second.
var admTables = []struct {
	p     Policy
	steps []admStep
}{
	{Policy{Name: "tenant", Algorithm: AlgFixedWindow, Limit: 3, Period: 10 * admSec}, []admStep{
		{1, 1, Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 9 * admSec}},
		{2, 2, Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 8 * admSec}},
		{3, 1, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: 7 * admSec, ResetAfter: 7 * admSec}},
		{3, 4, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: Never, ResetAfter: 7 * admSec}},
		{10, 1, Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 10 * admSec}}, // next window
		{19.5, 2, Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: admSec / 2}},
	}},
	{Policy{Name: "tenant", Algorithm: AlgSlidingWindow, Limit: 3, Period: 10 * admSec}, []admStep{
		{5, 2, Result{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 15 * admSec}},
		// prev 2, 20 % into the window: ⌊2 × 0.8⌋ + 0 = 1, + 2 ≤ 3
		{12, 2, Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 18 * admSec}},
		// ⌊2 × 0.6⌋ + 2 = 3: full until ⌊2 × (10 − e)/10⌋ = 0, e > 5 s
		{14, 1, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: admSec + time.Microsecond, ResetAfter: 16 * admSec}},
		{15.000001, 1, Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 15*admSec - time.Microsecond}},
		{16, 5, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: Never, ResetAfter: 14 * admSec}},
		{31, 1, Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 19 * admSec}}, // both windows gone
	}},
	{Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 3, Period: 3 * admSec, Burst: 3}, []admStep{
		{0, 1, Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: admSec}},
		{0, 2, Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * admSec}},
		{0.5, 1, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: admSec / 2, ResetAfter: 2500 * time.Millisecond}},
		{1, 1, Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * admSec}},
		{1, 4, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: Never, ResetAfter: 3 * admSec}},
		{10, 1, Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: admSec}},
	}},
	{Policy{Name: "tenant", Algorithm: AlgTokenBucket, Limit: 3, Period: 3 * admSec, Burst: 3}, []admStep{
		{0, 1, Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: admSec}},
		{0, 2, Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * admSec}},
		{0.5, 1, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: admSec / 2, ResetAfter: 2500 * time.Millisecond}},
		{1, 1, Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * admSec}},
		{1, 4, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: Never, ResetAfter: 3 * admSec}},
		{1.5, 1, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: admSec / 2, ResetAfter: 2500 * time.Millisecond}},
		{10, 1, Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: admSec}},
	}},
	{Policy{Name: "tenant", Algorithm: AlgSlidingLog, Limit: 3, Period: 10 * admSec}, []admStep{
		{1, 1, Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 10 * admSec}},
		{2, 2, Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 10 * admSec}},
		// the unit of t=1 leaves at 11
		{3, 1, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: 8 * admSec, ResetAfter: 9 * admSec}},
		{11, 1, Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 10 * admSec}},
		// two must leave: both units of t=2, at 12
		{11, 2, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: admSec, ResetAfter: 10 * admSec}},
		{11, 4, Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: Never, ResetAfter: 10 * admSec}},
	}},
}

// TestAlgorithmsAtFixedInstants runs admTables against the real Redis.
func TestAlgorithmsAtFixedInstants(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	for _, mode := range admModes {
		a := admNew(t, rdb, mode.cfg)
		for _, c := range admTables {
			t.Run(mode.name+"/"+string(c.p.Algorithm), func(t *testing.T) {
				tenant := admTenant(t, rdb)
				for i, st := range c.steps {
					want := st.want
					want.Policy = c.p.Name
					got := admOne(t, a, tenant, c.p, st.cost, admAt(st.at))
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("step %d (cost %d at +%vs): Result mismatch (-want +got):\n%s", i, st.cost, st.at, diff)
					}
				}
			})
		}
	}
}

// TestGCRAReferenceTimeline reproduces reference 000 §7.2 and §7.5: T = 1 s,
// τ = 5 s (Limit 1 per 1 s, Burst 5).
func TestGCRAReferenceTimeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	a := admNew(t, rdb)
	tenant := admTenant(t, rdb)
	p := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 1, Period: time.Second, Burst: 5}
	sec := func(s float64) time.Time { return time.UnixMicro(int64(s * 1e6)) }
	var lastWrite time.Time
	for i, at := range []float64{10.0, 11.0, 12.0, 12.0, 12.0, 12.0, 12.1} {
		lastWrite = time.Now()
		if r := admOne(t, a, tenant, p, 1, sec(at)); !r.Allowed {
			t.Fatalf("request %d at %.1f s refused: %+v", i, at, r)
		}
	}
	key := keys.Admission(tenant, "gcra", "tenant")
	before := admDump(t, rdb, tenant)
	r := admOne(t, a, tenant, p, 1, sec(12.1))
	want := Result{Policy: "tenant", Allowed: false, Limit: 5, Remaining: 0, RetryAfter: 900 * time.Millisecond, ResetAfter: 4900 * time.Millisecond}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("request at 12.1 s after the burst (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, admDump(t, rdb, tenant)); diff != "" {
		t.Errorf("refusal changed state (-before +after):\n%s", diff)
	}
	tat, err := rdb.Get(ctx, key).Int64()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	if tat != 17_000_000 {
		t.Errorf("stored TAT = %d µs, want 17000000 (17.0 s)", tat)
	}
	// PTTL counts down in real time from 4900 ms set by the last admitted
	// write: it may be lower by the real time since that write, no more.
	pttl := rdb.PTTL(ctx, key).Val()
	if elapsed := time.Since(lastWrite); pttl > 4900*time.Millisecond || pttl < 4900*time.Millisecond-elapsed-time.Millisecond {
		t.Errorf("stored TTL = %v, want 4.9s less at most the %v since the write", pttl, elapsed)
	}
}

// TestSlidingWindowReferenceExamples reproduces reference 000 §4.1: 100 per
// minute, previous window 80.
func TestSlidingWindowReferenceExamples(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	a := admNew(t, rdb)
	p := Policy{Name: "tenant", Algorithm: AlgSlidingWindow, Limit: 100, Period: time.Minute}

	t.Run("current 20 at 25% admits, estimate 80", func(t *testing.T) {
		tenant := admTenant(t, rdb)
		if r := admOne(t, a, tenant, p, 80, admAt(30)); !r.Allowed { // previous window
			t.Fatalf("80 in the previous window refused: %+v", r)
		}
		if r := admOne(t, a, tenant, p, 20, admAt(60)); !r.Allowed { // current window, at its start
			t.Fatalf("20 at the current window's start refused: %+v", r)
		}
		got := admOne(t, a, tenant, p, 1, admAt(75))
		// estimate = 80 × 0.75 + 20 = 80, so 19 remain after this one
		want := Result{Policy: "tenant", Allowed: true, Limit: 100, Remaining: 19, ResetAfter: 105 * time.Second}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	t.Run("current 85 at 75% refuses, estimate 105", func(t *testing.T) {
		// Admissions cannot reach current 85 before 81.25 % of the window
		// (80 × 0.1875 + 85 = 100), so the reference's state is written
		// directly: the Hash of sliding_window.lua, window admBase/60 + 1.
		tenant := admTenant(t, rdb)
		key := keys.Admission(tenant, "sliding_window", "tenant")
		w := strconv.FormatInt(admBase/60+1, 10)
		if err := rdb.HSet(ctx, key, "w", w, "c", 85, "p", 80).Err(); err != nil {
			t.Fatal(err)
		}
		rdb.PExpire(ctx, key, time.Minute)
		before := admDump(t, rdb, tenant)
		got := admOne(t, a, tenant, p, 1, admAt(105))
		// estimate = 80 × 0.25 + 85 = 105 > 99. Retry when ⌊80 × (60 − e)/60⌋
		// ≤ 14, i.e. e > 48.75 s: 3.75 s + 1 µs after 45 s.
		want := Result{Policy: "tenant", Allowed: false, Limit: 100, Remaining: 0,
			RetryAfter: 3750001 * time.Microsecond, ResetAfter: 75 * time.Second}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, admDump(t, rdb, tenant)); diff != "" {
			t.Errorf("refusal changed state (-before +after):\n%s", diff)
		}
	})
}

// TestFixedWindowBoundaryAdmitsTwiceTheLimit shows the fixed window's known
// weakness (reference 000 §2.3): Limit units just before a boundary and Limit
// more just after it, 2 × Limit within 2 ms.
func TestFixedWindowBoundaryAdmitsTwiceTheLimit(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	a := admNew(t, rdb)
	tenant := admTenant(t, rdb)
	p := Policy{Name: "tenant", Algorithm: AlgFixedWindow, Limit: 100, Period: time.Minute}
	admitted := 0
	for _, at := range []float64{59.999, 60.001} {
		for range 150 {
			if admOne(t, a, tenant, p, 1, admAt(at)).Allowed {
				admitted++
			}
		}
	}
	if admitted != 200 {
		t.Errorf("admitted %d across the boundary within 2 ms, want 200 (2 × limit)", admitted)
	}
}
