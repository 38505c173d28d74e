package outflow_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/outflow"
)

// levelCases are stored states at instants after t0, each checked against
// the scripts by TestLevelAgreesWithTheBucketScript.
var levelCases = []struct {
	name     string
	water    map[string]any // keys.Water fields, times as offsets after t0
	override map[string]any
	at       time.Duration // the instant, after t0
	want     outflow.Level
}{
	{"leaks at the rate", map[string]any{"water": 2e6, "ts": 0}, nil, 50 * time.Millisecond,
		outflow.Level{Rate: 10, Capacity: 100, Effective: 10, Water: 1.5}},
	{"adaptive rate recovering", map[string]any{"water": 8e6, "ts": 0, "eff": 4, "eff_ts": 0, "eff_inc": 1}, nil, time.Second,
		outflow.Level{Rate: 10, Capacity: 100, Effective: 5, Water: 3}},
	{"adaptive rate recovered", map[string]any{"water": 8e6, "ts": 0, "eff": 4, "eff_ts": 0, "eff_inc": 100}, nil, time.Second,
		outflow.Level{Rate: 10, Capacity: 100, Effective: 10, Water: 0}},
	{"override", map[string]any{"water": 30e6, "ts": 0}, map[string]any{"outflow_rate": 20, "outflow_capacity": 50}, 500 * time.Millisecond,
		outflow.Level{Rate: 20, Capacity: 50, Effective: 20, Water: 20}},
	{"level written after now", map[string]any{"water": 2e6, "ts": int64(time.Second / time.Microsecond)}, nil, 0,
		outflow.Level{Rate: 10, Capacity: 100, Effective: 10, Water: 2}},
	{"adaptive rate without eff_ts: no recovery yet", map[string]any{"water": 8e6, "ts": 0, "eff": 4, "eff_inc": 1}, nil, time.Second,
		outflow.Level{Rate: 10, Capacity: 100, Effective: 4, Water: 4}},
}

// TestLevelAgreesWithTheBucketScript: Limit.At, the Go copy of the
// formulas, gives the rate and the level leaky_bucket.lua uses at the same
// instant (its reply after a take of 1 unit: the level plus 1), on a few
// stored states, and gives them from the raw values tenant_stats.lua reads.
func TestLevelAgreesWithTheBucketScript(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	lim := outflow.Limit{Rate: 10, Capacity: 100}
	for _, tc := range levelCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tenant := testenv.Name(t, "lvl")
			t.Cleanup(func() { rdb.Del(context.Background(), keys.Water(tenant), keys.Override(tenant)) })
			base := t0.UnixMicro()
			for f, v := range tc.water {
				if f == "ts" || f == "eff_ts" {
					v = base + int64(toInt(v))
				}
				rdb.HSet(ctx, keys.Water(tenant), f, v)
			}
			if tc.override != nil {
				rdb.HSet(ctx, keys.Override(tenant), tc.override)
			}
			st := readState(t, rdb.HMGet(ctx, keys.Override(tenant), "outflow_rate", "outflow_capacity").Val(),
				rdb.HMGet(ctx, keys.Water(tenant), "water", "ts", "eff", "eff_ts", "eff_inc").Val())
			now := t0.Add(tc.at)
			got := lim.At(st, float64(now.UnixMicro()))
			if math.Abs(got.Water-tc.want.Water) > 1e-6 || got.Rate != tc.want.Rate || got.Capacity != tc.want.Capacity || math.Abs(got.Effective-tc.want.Effective) > 1e-9 {
				t.Errorf("At = %+v, want %+v", got, tc.want)
			}
			res, err := outflow.NewBucket(rdb).TakeAt(ctx, tenant, lim, 1, now)
			if err != nil || !res.Allowed {
				t.Fatalf("take = %+v, %v; want allowed", res, err)
			}
			if res.Rate != math.Floor(got.Effective*1000)/1000 || res.Capacity != got.Capacity || math.Abs(res.Water-(got.Water+1)) > 1e-6 {
				t.Errorf("script used rate %v, capacity %v, level %v after 1 unit; At says %+v", res.Rate, res.Capacity, res.Water, got)
			}
		})
	}
}

// TestLevelFromTenantStats: the raw values of tenant_stats.lua, read at
// Redis TIME, give through Limit.At the level and rate leaky_bucket.lua
// uses at that instant.
func TestLevelFromTenantStats(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "lvl")
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ts := now.Add(-200 * time.Millisecond).UnixMicro()
	rdb.HSet(ctx, keys.Water(tenant), "water", 9e6, "ts", ts, "eff", 3, "eff_ts", ts, "eff_inc", 2)
	rdb.PExpire(ctx, keys.Water(tenant), time.Minute)
	v, err := lua.TenantStats.Strings(lua.Call{Script: lua.TenantStats, Keys: []string{
		keys.Backlog(tenant), keys.Override(tenant), keys.Water(tenant), keys.Delivering(tenant),
		keys.JobIndex(tenant, "dead"), keys.Outflow(tenant),
	}, Args: []any{10}}.Run(ctx, rdb).Val())
	if err != nil || len(v) != 12 {
		t.Fatalf("tenant_stats = %v, %v", v, err)
	}
	raw := make([]any, 12)
	for i, s := range v {
		raw[i] = s
	}
	st := readState(t, raw[2:4], raw[4:9])
	lim := outflow.Limit{Rate: 10, Capacity: 100}
	nowUS, _ := strconv.ParseFloat(v[0], 64)
	got := lim.At(st, nowUS)
	res, err := outflow.NewBucket(rdb).TakeAt(ctx, tenant, lim, 1, time.UnixMicro(int64(nowUS)))
	if err != nil || !res.Allowed {
		t.Fatalf("take = %+v, %v; want allowed", res, err)
	}
	if res.Rate != math.Floor(got.Effective*1000)/1000 || math.Abs(res.Water-(got.Water+1)) > 1e-6 {
		t.Errorf("script used rate %v and level %v after 1 unit; At from tenant_stats says %+v", res.Rate, res.Water, got)
	}
}

// readState builds a State from the HMGET values of the override
// (outflow_rate, outflow_capacity) and water (water, ts, eff, eff_ts,
// eff_inc) hashes; nil or "" is 0.
func readState(t *testing.T, ov, water []any) outflow.State {
	t.Helper()
	f := func(v any) float64 {
		s, _ := v.(string)
		if s == "" {
			return 0
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("stored %q: %v", s, err)
		}
		return x
	}
	return outflow.State{
		OverrideRate: f(ov[0]), OverrideCapacity: f(ov[1]),
		WaterMicro: f(water[0]), TSMicro: f(water[1]), Eff: f(water[2]), EffTSMicro: f(water[3]), EffInc: f(water[4]),
	}
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	}
	return 0
}

// TestAtUnlimitedAndOverrideZero: an unlimited outflow (spelled out, or no
// rate at all) has no rate and no bucket whatever is stored, and an
// override outflow_rate of 0 is no override: the configured rate applies,
// it never means unlimited.
func TestAtUnlimitedAndOverrideZero(t *testing.T) {
	now := float64(t0.UnixMicro())
	tests := []struct {
		name string
		o    config.Outflow
		st   outflow.State
		want outflow.Level
	}{
		{"unlimited", config.Outflow{Unlimited: true}, outflow.State{OverrideRate: 3}, outflow.Level{}},
		{"no rate: unlimited by default", config.Outflow{}, outflow.State{OverrideRate: 3}, outflow.Level{}},
		{"override 0", config.Outflow{Rate: 2}, outflow.State{}, outflow.Level{Rate: 2, Capacity: 2, Effective: 2}},
		{"override 3", config.Outflow{Rate: 2}, outflow.State{OverrideRate: 3}, outflow.Level{Rate: 3, Capacity: 2, Effective: 3}},
	}
	for _, tc := range tests {
		if got := outflow.Of(tc.o).At(tc.st, now); got != tc.want {
			t.Errorf("%s: At = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestOf: a configured outflow resolves with config's defaults, applied
// once by config.Outflow.WithDefaults.
func TestOf(t *testing.T) {
	off := false
	tests := []struct {
		o    config.Outflow
		want outflow.Limit
	}{
		{config.Outflow{}, outflow.Limit{Adaptive: true}},
		{config.Outflow{Unlimited: true, Rate: 5, Concurrency: 3}, outflow.Limit{Adaptive: true, Concurrency: 3}},
		{config.Outflow{Rate: 0.5}, outflow.Limit{Rate: 0.5, Capacity: 1, MinRate: 0.05, Adaptive: true}},
		{config.Outflow{Rate: 40, Capacity: 2, MinRate: 1, Adaptive: &off}, outflow.Limit{Rate: 40, Capacity: 2, MinRate: 1}},
	}
	for _, tc := range tests {
		if got := outflow.Of(tc.o); got != tc.want {
			t.Errorf("Of(%+v) = %+v, want %+v", tc.o, got, tc.want)
		}
	}
}
