package limits_test

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
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/lua"
)

// TestLeakyScriptRefusesUnrepresentableNumbers calls lua/leaky_bucket.lua
// directly with each number it cannot hold exactly (in ARGV, in the
// override hash, in the stored water hash) and checks that it answers an
// error naming the argument and writes nothing: the water key stays absent,
// or holds exactly what it held, with its TTL.
func TestLeakyScriptRefusesUnrepresentableNumbers(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	script := lua.MustLoad("leaky_bucket.lua")
	now := strconv.FormatInt(t0.UnixMicro(), 10)
	good := []string{"10", "3", "1", now, "60000"}
	tests := []struct {
		name     string
		argv     map[int]string    // ARGV index (0-based) → value
		override map[string]string // keys.Override fields
		stored   map[string]string // keys.Water fields
		want     string            // in the error
	}{
		{"rate 0", map[int]string{0: "0"}, nil, nil, "rate (ARGV[1])"},
		{"rate negative", map[int]string{0: "-1"}, nil, nil, "rate (ARGV[1])"},
		{"rate NaN", map[int]string{0: "nan"}, nil, nil, "rate (ARGV[1])"},
		{"rate inf", map[int]string{0: "inf"}, nil, nil, "rate (ARGV[1])"},
		{"rate × 1000 at 2^53", map[int]string{0: "9007199254740.992"}, nil, nil, "rate (ARGV[1])"},
		{"rate not a number", map[int]string{0: "fast"}, nil, nil, "rate (ARGV[1])"},
		{"capacity 0", map[int]string{1: "0"}, nil, nil, "capacity (ARGV[2])"},
		{"capacity NaN", map[int]string{1: "nan"}, nil, nil, "capacity (ARGV[2])"},
		{"capacity inf", map[int]string{1: "inf"}, nil, nil, "capacity (ARGV[2])"},
		{"capacity × 10^6 at 2^53", map[int]string{1: "9007199254.740992"}, nil, nil, "capacity (ARGV[2])"},
		{"capacity 1e10", map[int]string{1: "1e10"}, nil, nil, "capacity (ARGV[2])"},
		{"cost 0", map[int]string{2: "0"}, nil, nil, "cost (ARGV[3])"},
		{"cost negative", map[int]string{2: "-3"}, nil, nil, "cost (ARGV[3])"},
		{"cost fractional", map[int]string{2: "1.5"}, nil, nil, "cost (ARGV[3])"},
		{"cost NaN", map[int]string{2: "nan"}, nil, nil, "cost (ARGV[3])"},
		{"cost inf", map[int]string{2: "inf"}, nil, nil, "cost (ARGV[3])"},
		{"cost not a number", map[int]string{2: "lots"}, nil, nil, "cost (ARGV[3])"},
		{"now negative", map[int]string{3: "-1"}, nil, nil, "now (ARGV[4])"},
		{"now fractional", map[int]string{3: "1.5"}, nil, nil, "now (ARGV[4])"},
		{"now at 2^53", map[int]string{3: "9007199254740992"}, nil, nil, "now (ARGV[4])"},
		{"margin negative", map[int]string{4: "-1"}, nil, nil, "margin (ARGV[5])"},
		{"margin 2^31", map[int]string{4: "2147483648"}, nil, nil, "margin (ARGV[5])"},
		{"override rate inf", nil, map[string]string{"outflow_rate": "inf"}, nil, "override outflow_rate"},
		{"override rate 0", nil, map[string]string{"outflow_rate": "0"}, nil, "override outflow_rate"},
		{"override rate NaN", nil, map[string]string{"outflow_rate": "nan"}, nil, "override outflow_rate"},
		{"override capacity 1e10", nil, map[string]string{"outflow_capacity": "1e10"}, nil, "override outflow_capacity"},
		{"override capacity negative", nil, map[string]string{"outflow_capacity": "-1"}, nil, "override outflow_capacity"},
		{"stored water 9.2e24", nil, nil, map[string]string{"water": "9.2233720368547758e+24", "ts": now}, "stored water"},
		{"stored water negative", nil, nil, map[string]string{"water": "-5", "ts": now}, "stored water"},
		{"stored water fractional", nil, nil, map[string]string{"water": "1.5", "ts": now}, "stored water"},
		{"stored water garbage", nil, nil, map[string]string{"water": "full", "ts": now}, "stored water"},
		{"stored ts 0", nil, nil, map[string]string{"water": "1", "ts": "0"}, "stored ts"},
		{"stored ts NaN", nil, nil, map[string]string{"water": "1", "ts": "nan"}, "stored ts"},
		{"stored ts 1e17", nil, nil, map[string]string{"water": "1", "ts": "1e17"}, "stored ts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tenant := testenv.Name(t, "leaky")
			wk, ok := keys.Water(tenant), keys.Override(tenant)
			t.Cleanup(func() { rdb.Del(context.Background(), wk, ok) })
			if len(tc.override) > 0 {
				rdb.HSet(ctx, ok, tc.override)
			}
			if len(tc.stored) > 0 {
				rdb.HSet(ctx, wk, tc.stored)
				rdb.PExpire(ctx, wk, time.Minute)
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
			if len(tc.stored) == 0 {
				if n := rdb.Exists(ctx, wk).Val(); n != 0 {
					t.Errorf("water key exists after a refused call on an empty bucket")
				}
			} else if ttl := rdb.PTTL(ctx, wk).Val(); ttl <= 0 {
				t.Errorf("stored water key PTTL = %v after a refused call, want its TTL kept", ttl)
			}
		})
	}
}

// TestLeakyNeverWritesNothing: a job whose cost exceeds the capacity (the
// configured one or the override, up to 2^63−1) gets Never, and the water
// key is neither created nor changed.
func TestLeakyNeverWritesNothing(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	l := limits.NewLeaky(rdb)
	lim := limits.LeakyLimit{Rate: 10, Capacity: 5}
	for _, cost := range []int64{6, 1 << 53, math.MaxInt64} {
		tenant := testenv.Name(t, "leaky")
		got, err := l.TakeAt(ctx, tenant, lim, cost, t0)
		if err != nil {
			t.Fatalf("cost %d: %v", cost, err)
		}
		if want := (limits.LeakyResult{Never: true, Rate: 10, Capacity: 5}); got != want {
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

// TestLeakyEveryAllowedCallLeavesATTL checks PTTL > 0 on the water key
// after allowed calls at the edges: the largest capacity, a rate so small
// that the bucket takes centuries to empty (the TTL is capped at 30 days),
// the largest rate.
func TestLeakyEveryAllowedCallLeavesATTL(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	l := limits.NewLeaky(rdb)
	const maxCap = 9007199254 // capacity × 10^6 just below 2^53
	tests := []struct {
		name string
		lim  limits.LeakyLimit
		cost int64
	}{
		{"ordinary", limits.LeakyLimit{Rate: 10, Capacity: 3}, 3},
		{"largest capacity, full", limits.LeakyLimit{Rate: 1, Capacity: maxCap}, maxCap},
		{"tiny rate", limits.LeakyLimit{Rate: 1e-12, Capacity: 1000}, 1000},
		{"largest rate", limits.LeakyLimit{Rate: 9e12, Capacity: 1}, 1},
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
