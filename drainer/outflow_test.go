package drainer_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestEffectiveRateUnlimitedAndOverrideZero: an unlimited outflow has no
// rate (ok false, nothing read), and an override outflow_rate of 0 is no
// override: the configured rate applies, it never means unlimited.
func TestEffectiveRateUnlimitedAndOverrideZero(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "dr")
	t.Cleanup(func() { rdb.Del(ctx, keys.Override(tenant)) })
	if r, ok, err := drainer.EffectiveRate(ctx, rdb, tenant, config.Outflow{Unlimited: true}); err != nil || ok || r != 0 {
		t.Errorf("EffectiveRate(unlimited) = %v, %v, %v; want 0, false, nil", r, ok, err)
	}
	if r, ok, err := drainer.EffectiveRate(ctx, rdb, tenant, config.Outflow{}); err != nil || ok || r != 0 {
		t.Errorf("EffectiveRate(no rate, defaults to unlimited) = %v, %v, %v; want 0, false, nil", r, ok, err)
	}
	rdb.HSet(ctx, keys.Override(tenant), "outflow_rate", "0")
	rdb.PExpire(ctx, keys.Override(tenant), time.Minute)
	if r, ok, err := drainer.EffectiveRate(ctx, rdb, tenant, config.Outflow{Rate: 2}); err != nil || !ok || r != 2 {
		t.Errorf("EffectiveRate(rate 2, override 0) = %v, %v, %v; want 2, true, nil", r, ok, err)
	}
	rdb.HSet(ctx, keys.Override(tenant), "outflow_rate", "3")
	if r, ok, err := drainer.EffectiveRate(ctx, rdb, tenant, config.Outflow{Rate: 2}); err != nil || !ok || r != 3 {
		t.Errorf("EffectiveRate(rate 2, override 3) = %v, %v, %v; want 3, true, nil", r, ok, err)
	}
}
