package limits

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// Rescaled is the outcome of RescaleGCRA.
type Rescaled struct {
	// Changed says whether a stored TAT was rewritten; false when the policy
	// had no state or no debt (TAT at or before now).
	Changed bool
	// TAT is the theoretical arrival time after the call; the zero Time
	// when there is no state.
	TAT time.Time
	// Now is the instant used (Redis TIME unless given).
	Now time.Time
}

// RescaleGCRA carries the stored state of tenant's gcra policy over a change
// of its rate from old to new (both gcra; Name from new), so the tenant's
// outstanding debt keeps its size in requests rather than in time. With the
// emission intervals T = ⌈Period / Limit⌉ µs of each,
//
//	TAT' = now + ⌈(TAT − now) × T_new / T_old⌉,  PX TTL = TAT' − now
//
// at most τ_new = new.Burst × T_new ahead (the new plan's full bucket), and
// nothing changes when TAT ≤ now or the key is absent. Example: limit 1
// per second with burst 5, exhausted at now (TAT = now + 5 s), upgraded to 10
// per second: TAT' = now + 0.5 s, so with burst 5 the next request passes
// after 0.1 s instead of 4.6 s. The cap keeps a cut from forgiving a debt:
// gcra.lua forgets a TAT more than τ ahead (another policy's state), so
// limit 1000/s cut to 1/s after a batch of 1000 (TAT' ≈ 1000 s ahead) let
// the next request through at once; capped, it waits one emission interval.
//
// now is the zero Time in production (Redis TIME, the admission scripts'
// clock); tests pass an instant. The call is one atomic script
// (lua/gcra_rescale.lua), so an admission racing it sees the TAT before or
// after, never between.
func RescaleGCRA(ctx context.Context, rdb redis.Scripter, tenant string, old, new Policy, now time.Time) (Rescaled, error) {
	if old.Algorithm != AlgGCRA || new.Algorithm != AlgGCRA {
		return Rescaled{}, fmt.Errorf("limits: rescale %s %s: both policies must be gcra (got %s and %s)", tenant, new.Name, old.Algorithm, new.Algorithm)
	}
	if !keys.ValidTenant(tenant) {
		return Rescaled{}, fmt.Errorf("limits: rescale %q: invalid tenant id", tenant)
	}
	for _, p := range []Policy{old, new} {
		if err := p.Validate(); err != nil {
			return Rescaled{}, fmt.Errorf("limits: rescale %s: %w", tenant, err)
		}
	}
	v, err := rescaleCall(tenant, old, new, now).Run(ctx, rdb).Result()
	if err != nil {
		return Rescaled{}, fmt.Errorf("limits: rescale %s %s: %w", tenant, new.Name, err)
	}
	out, err := rescaleReply(v)
	if err != nil {
		return Rescaled{}, fmt.Errorf("limits: rescale %s %s: %w", tenant, new.Name, err)
	}
	return out, nil
}

// rescaleCall is the call of lua/gcra_rescale.lua carrying the TAT of
// tenant's gcra policy new.Name from old's rate to new's, at now (zero:
// Redis TIME).
func rescaleCall(tenant string, old, new Policy, now time.Time) lua.Call {
	var nowUS int64
	if !now.IsZero() {
		nowUS = now.UnixMicro()
	}
	return lua.Call{
		Script: lua.GCRARescale,
		Keys:   []string{keys.Admission(tenant, string(AlgGCRA), new.Name)},
		Args:   []any{nowUS, old.Limit, old.Period.Microseconds(), new.Limit, new.Period.Microseconds(), new.burst()},
	}
}

// rescaleReply reads gcra_rescale.lua's reply {rescaled (0 or 1), TAT µs
// (0: no key), now µs}; any other shape is an error wrapping lua.ErrReply.
func rescaleReply(v any) (Rescaled, error) {
	s := lua.GCRARescale
	res, err := s.Ints(v, 3)
	if err != nil {
		return Rescaled{}, err
	}
	switch {
	case res[0] != 0 && res[0] != 1:
		return Rescaled{}, s.ReplyError("rescaled is %d, want 0 or 1", res[0])
	case res[1] < 0 || res[2] <= 0:
		return Rescaled{}, s.ReplyError("tat %d and now %d, want tat >= 0 and now > 0", res[1], res[2])
	}
	out := Rescaled{Changed: res[0] == 1, Now: time.UnixMicro(res[2])}
	if res[1] > 0 {
		out.TAT = time.UnixMicro(res[1])
	}
	return out, nil
}
