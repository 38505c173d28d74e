package outflow

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// Adaptive outflow (AIMD) constants. A downstream 429/503 multiplies the
// tenant's effective rate by AdaptFactor (not more often than once per
// AdaptCooldown, whatever the number of jobs in flight), down to the
// limit's MinRate; it then climbs back by Rate × AdaptRecovery per second
// to the configured rate (from the floor to the full rate in at most
// 1/AdaptRecovery s).
const (
	AdaptFactor   = 0.5
	AdaptCooldown = time.Second
	AdaptRecovery = 0.1
)

// Decrease is the answer of Bucket.Decrease.
type Decrease struct {
	// Rate is the tenant's effective rate after the call, units per second.
	Rate float64
	// Changed is false when the call fell within AdaptCooldown of the
	// previous decrease, which it left alone.
	Changed bool
}

// Decrease lowers the tenant's shared effective rate after a downstream
// 429/503 (lua/drain_adapt.lua), by Redis TIME: rate × AdaptFactor, at
// least lim.MinRate, recovering by lim.Rate × AdaptRecovery per second. The
// caller decides whether lim is adaptive; lim must be Shaped.
func (b *Bucket) Decrease(ctx context.Context, tenant string, lim Limit) (Decrease, error) {
	v, err := decreaseCall(tenant, lim, 0).Run(ctx, b.rdb).Result()
	if err == nil {
		var d Decrease
		if d, err = parseDecrease(v); err == nil {
			return d, nil
		}
	}
	return Decrease{}, fmt.Errorf("outflow: decrease %s: %w", tenant, err)
}

// decreaseCall is drain_adapt.lua's call: KEYS water and override hashes,
// ARGV rate, floor, factor, recovery, cooldown (ms), now (µs, 0: Redis
// TIME), TTL floor (ms).
func decreaseCall(tenant string, lim Limit, nowUS int64) lua.Call {
	return lua.Call{
		Script: lua.DrainAdapt,
		Keys:   []string{keys.Water(tenant), keys.Override(tenant)},
		Args: []any{fmtFloat(lim.Rate), fmtFloat(lim.MinRate), fmtFloat(AdaptFactor), fmtFloat(lim.Rate * AdaptRecovery),
			AdaptCooldown.Milliseconds(), nowUS, Margin.Milliseconds()},
	}
}

// parseDecrease reads drain_adapt.lua's reply {rate_milli >= 0, changed 0|1}.
func parseDecrease(v any) (Decrease, error) {
	s := lua.DrainAdapt
	res, err := s.Ints(v, 2)
	if err != nil {
		return Decrease{}, err
	}
	if res[0] < 0 || (res[1] != 0 && res[1] != 1) {
		return Decrease{}, s.ReplyError("%v, want {rate_milli >= 0, 0 or 1}", res)
	}
	return Decrease{Rate: float64(res[0]) / 1000, Changed: res[1] == 1}, nil
}
