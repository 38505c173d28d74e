package config_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/outflow"
)

// TestOutflowBoundsFitTheScript: the largest capacity and rate and the
// smallest rate the validator accepts are taken by the real bucket script
// without an error, as the configured limit and as the override fields a
// runtime spec writes: the validator and lua/leaky_bucket.lua agree
// (TestOutflowBounds shows the validator refusing just past each bound).
func TestOutflowBoundsFitTheScript(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	leaky := outflow.NewBucket(rdb)
	for _, tc := range []struct {
		name string
		lim  outflow.Limit
		cost int64
	}{
		{"largest rate and capacity", outflow.Limit{Rate: config.MaxOutflowRate, Capacity: config.MaxOutflowCapacity}, config.MaxMaxJobCost},
		{"smallest rate, largest capacity", outflow.Limit{Rate: config.MinOutflowRate, Capacity: config.MaxOutflowCapacity}, config.MaxMaxJobCost},
		{"smallest rate and capacity", outflow.Limit{Rate: config.MinOutflowRate, Capacity: 1}, 1},
		{"default min_rate of the smallest rate", outflow.Limit{Rate: config.MinOutflowRate / 10, Capacity: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The outflow passes the validator first.
			y := fmt.Sprintf("tenants: {a: {outflow: {rate: %v, capacity: %v}}}\n", tc.lim.Rate, tc.lim.Capacity)
			if tc.lim.Rate >= config.MinOutflowRate {
				if _, err := config.Parse([]byte(y)); err != nil {
					t.Fatalf("Parse(%q): %v", y, err)
				}
			}
			tenant := "bounds" + strconv.FormatUint(rand.Uint64(), 36)
			t.Cleanup(func() { rdb.Del(context.Background(), keys.Water(tenant), keys.Override(tenant)) })
			for _, try := range []string{"configured", "override"} {
				lim := tc.lim
				if try == "override" {
					// As tenant_write.lua stores them, over a small configured limit.
					if err := rdb.HSet(ctx, keys.Override(tenant),
						"outflow_rate", strconv.FormatFloat(tc.lim.Rate, 'f', -1, 64),
						"outflow_capacity", strconv.FormatFloat(tc.lim.Capacity, 'f', -1, 64)).Err(); err != nil {
						t.Fatal(err)
					}
					lim = outflow.Limit{Rate: 1, Capacity: 1}
					rdb.Del(ctx, keys.Water(tenant))
				}
				res, err := leaky.Take(ctx, tenant, lim, tc.cost)
				if err != nil {
					t.Fatalf("%s: Take(%+v, cost %d): %v", try, lim, tc.cost, err)
				}
				if !res.Allowed || res.Capacity != tc.lim.Capacity {
					t.Errorf("%s: Take(%+v, cost %d) = %+v, want allowed with capacity %v", try, lim, tc.cost, res, tc.lim.Capacity)
				}
				// A second take of the same cost waits (or, with a full bucket, never errs).
				if _, err := leaky.Take(ctx, tenant, lim, tc.cost); err != nil {
					t.Errorf("%s: second Take: %v", try, err)
				}
				ttl, err := rdb.PTTL(ctx, keys.Water(tenant)).Result()
				if err != nil || ttl <= 0 {
					t.Errorf("%s: water key TTL %v, %v; want one", try, ttl, err)
				}
			}
		})
	}
}
