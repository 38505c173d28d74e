package outflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/outflow"
)

// TestBucketOverrideRateZeroIsNoOverride: an override outflow_rate of 0 (or
// a negative one, NaN, or one that is not a number) never lifts the limit
// and never wedges the lane: the configured rate applies, the second job of
// a 1-unit bucket at 2/s waits half a second. (A positive override the
// script cannot represent is an error: TestBucketScriptRefusesUnrepresentableNumbers.)
func TestBucketOverrideRateZeroIsNoOverride(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	for _, ov := range []string{"0", "-1", "x", "nan", "-inf"} {
		tenant := testenv.Name(t, "lk")
		t.Cleanup(func() { rdb.Del(ctx, keys.Water(tenant), keys.Override(tenant)) })
		rdb.HSet(ctx, keys.Override(tenant), "outflow_rate", ov)
		rdb.PExpire(ctx, keys.Override(tenant), time.Minute)
		l := outflow.NewBucket(rdb)
		lim := outflow.Limit{Rate: 2, Capacity: 1}
		if r, err := l.TakeAt(ctx, tenant, lim, 1, t0); err != nil || !r.Allowed || r.Rate != 2 {
			t.Fatalf("override %q: first take = %+v, %v; want allowed at rate 2", ov, r, err)
		}
		r, err := l.TakeAt(ctx, tenant, lim, 1, t0)
		if err != nil || r.Allowed || r.Wait != 500*time.Millisecond || r.Rate != 2 {
			t.Errorf("override %q: second take = %+v, %v; want a 500ms wait at rate 2", ov, r, err)
		}
	}
}
