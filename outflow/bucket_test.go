package outflow_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/outflow"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestBucketAtFixedInstants(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	type step struct {
		at   time.Duration // after t0
		cost int64
		want outflow.Result
	}
	lim := outflow.Limit{Rate: 10, Capacity: 3}
	tests := []struct {
		name  string
		lim   outflow.Limit
		steps []step
	}{
		{"burst up to capacity then wait one drip", lim, []step{
			{0, 1, outflow.Result{Allowed: true, Water: 1, Rate: 10, Capacity: 3}},
			{0, 1, outflow.Result{Allowed: true, Water: 2, Rate: 10, Capacity: 3}},
			{0, 1, outflow.Result{Allowed: true, Water: 3, Rate: 10, Capacity: 3}},
			{0, 1, outflow.Result{Wait: 100 * time.Millisecond, Water: 3, Rate: 10, Capacity: 3}},
			{50 * time.Millisecond, 1, outflow.Result{Wait: 50 * time.Millisecond, Water: 2.5, Rate: 10, Capacity: 3}},
			{100 * time.Millisecond, 1, outflow.Result{Allowed: true, Water: 3, Rate: 10, Capacity: 3}},
		}},
		{"leak never goes below empty", lim, []step{
			{0, 2, outflow.Result{Allowed: true, Water: 2, Rate: 10, Capacity: 3}},
			{10 * time.Second, 1, outflow.Result{Allowed: true, Water: 1, Rate: 10, Capacity: 3}},
		}},
		// A job larger than the bucket never goes, even when it is empty
		// (it used to go then): nothing is written and the next job goes.
		{"cost above capacity never goes", lim, []step{
			{0, 1, outflow.Result{Allowed: true, Water: 1, Rate: 10, Capacity: 3}},
			{0, 4, outflow.Result{Never: true, Water: 1, Rate: 10, Capacity: 3}},
			{100 * time.Millisecond, 4, outflow.Result{Never: true, Water: 0, Rate: 10, Capacity: 3}},
			{100 * time.Millisecond, math.MaxInt64, outflow.Result{Never: true, Water: 0, Rate: 10, Capacity: 3}},
			{100 * time.Millisecond, 3, outflow.Result{Allowed: true, Water: 3, Rate: 10, Capacity: 3}},
			{100 * time.Millisecond, 1, outflow.Result{Wait: 100 * time.Millisecond, Water: 3, Rate: 10, Capacity: 3}},
		}},
		{"a wait is capped at an hour", outflow.Limit{Rate: 1e-6, Capacity: 1}, []step{
			{0, 1, outflow.Result{Allowed: true, Water: 1, Rate: 0, Capacity: 1}},
			{0, 1, outflow.Result{Wait: time.Hour, Water: 1, Rate: 0, Capacity: 1}},
		}},
		{"fractional rate", outflow.Limit{Rate: 0.5, Capacity: 1}, []step{
			{0, 1, outflow.Result{Allowed: true, Water: 1, Rate: 0.5, Capacity: 1}},
			{time.Second, 1, outflow.Result{Wait: time.Second, Water: 0.5, Rate: 0.5, Capacity: 1}},
			{2 * time.Second, 1, outflow.Result{Allowed: true, Water: 1, Rate: 0.5, Capacity: 1}},
		}},
		{"a caller behind the last write leaks nothing", lim, []step{
			{time.Second, 3, outflow.Result{Allowed: true, Water: 3, Rate: 10, Capacity: 3}},
			// The bucket's clock stays at its last write (At).
			{900 * time.Millisecond, 1, outflow.Result{Wait: 100 * time.Millisecond, Water: 3, Rate: 10, Capacity: 3, At: t0.Add(time.Second)}},
			{1100 * time.Millisecond, 1, outflow.Result{Allowed: true, Water: 3, Rate: 10, Capacity: 3}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tenant := testenv.Name(t, "leaky")
			l := outflow.NewBucket(rdb)
			for i, s := range tc.steps {
				got, err := l.TakeAt(ctx, tenant, tc.lim, s.cost, t0.Add(s.at))
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if s.want.At.IsZero() {
					s.want.At = t0.Add(s.at) // the reply carries the call's clock
				}
				if diff := cmp.Diff(s.want, got, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
					t.Errorf("step %d (at +%v, cost %d) mismatch (-want +got):\n%s", i, s.at, s.cost, diff)
				}
			}
		})
	}
}

func TestBucketTTLIsDrainTimePlusMargin(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "leaky")
	l := outflow.NewBucket(rdb)
	// 4 units at 2/s drain in 2 s.
	if _, err := l.TakeAt(ctx, tenant, outflow.Limit{Rate: 2, Capacity: 4}, 4, t0); err != nil {
		t.Fatal(err)
	}
	ttl, err := rdb.PTTL(ctx, keys.Water(tenant)).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := 2*time.Second + outflow.Margin
	if ttl > want || ttl < want-time.Second {
		t.Errorf("PTTL = %v, want %v (minus at most 1s of test time)", ttl, want)
	}
}

func TestBucketOverrideReachesNextCall(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "leaky")
	l := outflow.NewBucket(rdb)
	lim := outflow.Limit{Rate: 1, Capacity: 1}
	if _, err := l.TakeAt(ctx, tenant, lim, 1, t0); err != nil {
		t.Fatal(err)
	}
	got, err := l.TakeAt(ctx, tenant, lim, 1, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Wait != time.Second {
		t.Fatalf("before override: wait = %v, want 1s", got.Wait)
	}
	if err := rdb.HSet(ctx, keys.Override(tenant), "outflow_rate", "4", "outflow_capacity", "2").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Override(tenant)) })
	got, err = l.TakeAt(ctx, tenant, lim, 1, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := outflow.Result{Allowed: true, Water: 2, Rate: 4, Capacity: 2, At: t0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after override (-want +got):\n%s", diff)
	}
}

func TestBucketRejectsBadArguments(t *testing.T) {
	l := outflow.NewBucket(testenv.Redis(t))
	ctx := context.Background()
	tests := []struct {
		name string
		lim  outflow.Limit
		cost int64
	}{
		{"zero rate", outflow.Limit{Rate: 0, Capacity: 1}, 1},
		{"zero capacity", outflow.Limit{Rate: 1, Capacity: 0}, 1},
		{"zero cost", outflow.Limit{Rate: 1, Capacity: 1}, 0},
	}
	for _, tc := range tests {
		if _, err := l.TakeAt(ctx, "x", tc.lim, tc.cost, t0); err == nil {
			t.Errorf("%s: err = nil, want an error", tc.name)
		}
	}
}

// TestBucketManyCallersShareTheRate runs 8 goroutines (as 8 drainers would)
// against one tenant, stepping a shared clock by 1 ms 5,000 times (5 s).
// Whatever the interleaving, the admitted total must be rate × T + capacity
// (to within one unit), and no 1-s window may exceed rate + capacity.
func TestBucketManyCallersShareTheRate(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "leaky")
	l := outflow.NewBucket(rdb)
	lim := outflow.Limit{Rate: 100, Capacity: 5}
	const steps, workers = 5_000, 4
	var admitted [steps]atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < steps; i++ {
				// Every worker asks at every instant, in whatever order the
				// scheduler gives; calls at one instant leak nothing between
				// them, so the interleaving cannot change the total.
				res, err := l.TakeAt(ctx, tenant, lim, 1, t0.Add(time.Duration(i)*time.Millisecond))
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					admitted[i].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	var total int64
	for i := range admitted {
		total += admitted[i].Load()
	}
	// At 1 ms steps with goroutines racing, a worker may be behind another;
	// the script never leaks backwards, so the bound still holds.
	want := int64(lim.Rate*float64(steps)/1000) + int64(lim.Capacity)
	if total > want || total < want-int64(lim.Capacity)-1 {
		t.Errorf("admitted %d over %v, want %d (rate × T + capacity), at most capacity+1 fewer", total, steps*time.Millisecond, want)
	}
	for start := 0; start+1000 <= steps; start += 100 {
		var w int64
		for i := start; i < start+1000; i++ {
			w += admitted[i].Load()
		}
		if w > int64(lim.Rate+lim.Capacity) {
			t.Errorf("window [%dms, %dms) admitted %d, want ≤ rate + capacity = %v", start, start+1000, w, lim.Rate+lim.Capacity)
		}
	}
}

func TestBucketOnCluster(t *testing.T) {
	rdb := testenv.Cluster(t)
	ctx := context.Background()
	l := outflow.NewBucket(rdb)
	got, err := l.Take(ctx, testenv.Name(t, "leaky"), outflow.Limit{Rate: 10, Capacity: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Allowed {
		t.Errorf("first take on an empty bucket: allowed = false, want true (%+v)", got)
	}
}

func BenchmarkBucketTake(b *testing.B) {
	rdb := testenv.Redis(b)
	ctx := context.Background()
	l := outflow.NewBucket(rdb)
	tenant := testenv.Name(b, "leaky")
	lim := outflow.Limit{Rate: 1e9, Capacity: 1e6}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Take(ctx, tenant, lim, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleBucket() {
	rdb := redisForExample()
	defer rdb.Close()
	ctx := context.Background()
	l := outflow.NewBucket(rdb)
	tenant := "example-" + fmt.Sprint(time.Now().UnixNano())
	lim := outflow.Limit{Rate: 2, Capacity: 1} // 2 jobs/s, no burst
	first, _ := l.TakeAt(ctx, tenant, lim, 1, t0)
	second, _ := l.TakeAt(ctx, tenant, lim, 1, t0)
	fmt.Println(first.Allowed, second.Allowed, second.Wait)
	// Output: true false 500ms
}

// redisForExample connects to the Redis the tests use (SLUICE_TEST_REDIS,
// default 127.0.0.1:6379); examples cannot take a *testing.T.
func redisForExample() *redis.Client {
	addr := os.Getenv("SLUICE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	return redis.NewClient(&redis.Options{Addr: addr})
}
