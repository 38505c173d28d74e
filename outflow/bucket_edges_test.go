package outflow_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/outflow"
)

// TestBucketScriptRefusesUnrepresentableNumbers calls lua/leaky_bucket.lua
// directly with each number it cannot hold exactly (in ARGV, or a positive
// override it cannot represent) and checks that it answers an error naming
// the argument and writes nothing: the water key stays absent. (A corrupt
// stored level is healed instead: TestBucketHealsCorruptStoredLevel.)
func TestBucketScriptRefusesUnrepresentableNumbers(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	script := lua.LeakyBucket
	now := strconv.FormatInt(t0.UnixMicro(), 10)
	good := []string{"10", "3", "1", now, "60000"}
	tests := []struct {
		name     string
		argv     map[int]string    // ARGV index (0-based) → value
		override map[string]string // keys.Override fields
		want     string            // in the error
	}{
		{"rate 0", map[int]string{0: "0"}, nil, "rate (ARGV[1])"},
		{"rate negative", map[int]string{0: "-1"}, nil, "rate (ARGV[1])"},
		{"rate NaN", map[int]string{0: "nan"}, nil, "rate (ARGV[1])"},
		{"rate inf", map[int]string{0: "inf"}, nil, "rate (ARGV[1])"},
		{"rate × 1000 at 2^53", map[int]string{0: "9007199254740.992"}, nil, "rate (ARGV[1])"},
		{"rate not a number", map[int]string{0: "fast"}, nil, "rate (ARGV[1])"},
		{"capacity 0", map[int]string{1: "0"}, nil, "capacity (ARGV[2])"},
		{"capacity NaN", map[int]string{1: "nan"}, nil, "capacity (ARGV[2])"},
		{"capacity inf", map[int]string{1: "inf"}, nil, "capacity (ARGV[2])"},
		{"capacity × 10^6 at 2^53", map[int]string{1: "9007199254.740992"}, nil, "capacity (ARGV[2])"},
		{"capacity 1e10", map[int]string{1: "1e10"}, nil, "capacity (ARGV[2])"},
		{"cost 0", map[int]string{2: "0"}, nil, "cost (ARGV[3])"},
		{"cost negative", map[int]string{2: "-3"}, nil, "cost (ARGV[3])"},
		{"cost fractional", map[int]string{2: "1.5"}, nil, "cost (ARGV[3])"},
		{"cost NaN", map[int]string{2: "nan"}, nil, "cost (ARGV[3])"},
		{"cost inf", map[int]string{2: "inf"}, nil, "cost (ARGV[3])"},
		{"cost not a number", map[int]string{2: "lots"}, nil, "cost (ARGV[3])"},
		{"now negative", map[int]string{3: "-1"}, nil, "now (ARGV[4])"},
		{"now fractional", map[int]string{3: "1.5"}, nil, "now (ARGV[4])"},
		{"now at 2^53", map[int]string{3: "9007199254740992"}, nil, "now (ARGV[4])"},
		{"margin negative", map[int]string{4: "-1"}, nil, "margin (ARGV[5])"},
		{"margin 2^31", map[int]string{4: "2147483648"}, nil, "margin (ARGV[5])"},
		{"override rate inf", nil, map[string]string{"outflow_rate": "inf"}, "override outflow_rate"},
		{"override capacity 1e10", nil, map[string]string{"outflow_capacity": "1e10"}, "override outflow_capacity"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tenant := testenv.Name(t, "leaky")
			wk, ok := keys.Water(tenant), keys.Override(tenant)
			t.Cleanup(func() { rdb.Del(context.Background(), wk, ok) })
			if len(tc.override) > 0 {
				rdb.HSet(ctx, ok, tc.override)
			}
			argv := append([]string(nil), good...)
			for i, v := range tc.argv {
				argv[i] = v
			}
			args := make([]any, len(argv))
			for i, v := range argv {
				args[i] = v
			}
			before := rdb.HGetAll(ctx, wk).Val()
			_, err := script.Run(ctx, rdb, []string{wk, ok}, args...).Result()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("argv %q: err = %v, want an error naming %q", argv, err, tc.want)
			}
			after := rdb.HGetAll(ctx, wk).Val()
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("water hash changed by a refused call (-before +after):\n%s", diff)
			}
			if n := rdb.Exists(ctx, wk).Val(); n != 0 {
				t.Errorf("water key exists after a refused call on an empty bucket")
			}
		})
	}
}

// TestBucketNeverWritesNothing: a job whose cost exceeds the capacity (the
// configured one or the override, up to 2^63−1) gets Never, and the water
// key is neither created nor changed.
func TestBucketNeverWritesNothing(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	l := outflow.NewBucket(rdb)
	lim := outflow.Limit{Rate: 10, Capacity: 5}
	for _, cost := range []int64{6, 1 << 53, math.MaxInt64} {
		tenant := testenv.Name(t, "leaky")
		got, err := l.TakeAt(ctx, tenant, lim, cost, t0)
		if err != nil {
			t.Fatalf("cost %d: %v", cost, err)
		}
		if !got.At.Equal(t0) {
			t.Errorf("cost %d: the answer's clock %v, want the call's %v", cost, got.At, t0)
		}
		got.At = time.Time{}
		if want := (outflow.Result{Never: true, Rate: 10, Capacity: 5}); got != want {
			t.Errorf("cost %d on an empty bucket: got %+v, want %+v", cost, got, want)
		}
		if n := rdb.Exists(ctx, keys.Water(tenant)).Val(); n != 0 {
			t.Errorf("cost %d: the water key was created by a never answer", cost)
		}
	}
	// The override decides: capacity 5 configured, 2 overridden.
	tenant := testenv.Name(t, "leaky")
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Override(tenant)) })
	if _, err := l.TakeAt(ctx, tenant, lim, 1, t0); err != nil {
		t.Fatal(err)
	}
	before := rdb.HGetAll(ctx, keys.Water(tenant)).Val()
	rdb.HSet(ctx, keys.Override(tenant), "outflow_capacity", "2")
	got, err := l.TakeAt(ctx, tenant, lim, 3, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Never || got.Capacity != 2 {
		t.Errorf("cost 3 with override capacity 2: got %+v, want Never with capacity 2", got)
	}
	if diff := cmp.Diff(before, rdb.HGetAll(ctx, keys.Water(tenant)).Val()); diff != "" {
		t.Errorf("water hash changed by a never answer (-before +after):\n%s", diff)
	}
}

// TestBucketEveryAllowedCallLeavesATTL checks PTTL > 0 on the water key
// after allowed calls at the edges: the largest capacity, a rate so small
// that the bucket takes centuries to empty (the TTL is capped at 30 days),
// the largest rate.
func TestBucketEveryAllowedCallLeavesATTL(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	l := outflow.NewBucket(rdb)
	const maxCap = 9007199254 // capacity × 10^6 just below 2^53
	tests := []struct {
		name string
		lim  outflow.Limit
		cost int64
	}{
		{"ordinary", outflow.Limit{Rate: 10, Capacity: 3}, 3},
		{"largest capacity, full", outflow.Limit{Rate: 1, Capacity: maxCap}, maxCap},
		{"tiny rate", outflow.Limit{Rate: 1e-12, Capacity: 1000}, 1000},
		{"largest rate", outflow.Limit{Rate: 9e12, Capacity: 1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tenant := testenv.Name(t, "leaky")
			got, err := l.TakeAt(ctx, tenant, tc.lim, tc.cost, t0)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Allowed {
				t.Fatalf("got %+v, want allowed", got)
			}
			ttl := rdb.PTTL(ctx, keys.Water(tenant)).Val()
			if ttl <= 0 || ttl > 30*24*time.Hour {
				t.Errorf("PTTL = %v, want in (0, 30 days]", ttl)
			}
			if w := rdb.HGet(ctx, keys.Water(tenant), "water").Val(); w != strconv.FormatInt(tc.cost*1_000_000, 10) {
				t.Errorf("stored water = %q, want %d (an exact integer)", w, tc.cost*1_000_000)
			}
		})
	}
}

// TestBucketHealsCorruptStoredLevel: a stored water or ts the script cannot
// have written (an older version left water 9.2e24 on a key without a TTL)
// never makes every later call fail: the level reads as a full bucket at
// now (no invented leak, so no burst), the healed state is written back as
// exact integers with a TTL, and the bucket drains from there at its rate.
func TestBucketHealsCorruptStoredLevel(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	now := strconv.FormatInt(t0.UnixMicro(), 10)
	lim := outflow.Limit{Rate: 10, Capacity: 3}
	tests := []struct {
		name   string
		stored map[string]string
		// allowed: a job of cost 1 goes at once (a corrupt ts only; the
		// water of 1 micro-unit is kept), else it waits for a full bucket.
		allowed bool
	}{
		{"water 9.2e24", map[string]string{"water": "9.2233720368547758e+24", "ts": now}, false},
		{"water negative", map[string]string{"water": "-5", "ts": now}, false},
		{"water fractional", map[string]string{"water": "1.5", "ts": now}, false},
		{"water garbage", map[string]string{"water": "full", "ts": now}, false},
		{"ts 0", map[string]string{"water": "1", "ts": "0"}, true},
		{"ts NaN", map[string]string{"water": "1", "ts": "nan"}, true},
		{"ts 1e17", map[string]string{"water": "1", "ts": "1e17"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tenant := testenv.Name(t, "heal")
			wk := keys.Water(tenant)
			t.Cleanup(func() { rdb.Del(context.Background(), wk) })
			rdb.HSet(ctx, wk, tc.stored) // no TTL, as the old bug left it
			l := outflow.NewBucket(rdb)
			r, err := l.TakeAt(ctx, tenant, lim, 1, t0)
			if err != nil {
				t.Fatalf("take on a corrupt level: %v, want it healed", err)
			}
			if r.Allowed != tc.allowed {
				t.Fatalf("take = %+v, want allowed %v", r, tc.allowed)
			}
			if !tc.allowed && r.Wait != 100*time.Millisecond {
				t.Errorf("wait = %v, want 100ms (a full bucket of 3 at 10/s, cost 1)", r.Wait)
			}
			w := rdb.HGet(ctx, wk, "water").Val()
			if n, err := strconv.ParseInt(w, 10, 64); err != nil || n < 0 || n > 3_000_000 {
				t.Errorf("stored water after healing = %q, want an integer in [0, 3000000]", w)
			}
			if ttl := rdb.PTTL(ctx, wk).Val(); ttl <= 0 || ttl > 30*24*time.Hour {
				t.Errorf("PTTL after healing = %v, want (0, 30 days]", ttl)
			}
			if !tc.allowed {
				r, err := l.TakeAt(ctx, tenant, lim, 1, t0.Add(100*time.Millisecond))
				if err != nil || !r.Allowed {
					t.Errorf("take 100ms later = %+v, %v; want allowed (the healed bucket drains)", r, err)
				}
			}
		})
	}
}
