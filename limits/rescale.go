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
// and nothing changes when TAT ≤ now or the key is absent. Example: limit 1
// per second with burst 5, exhausted at now (TAT = now + 5 s), upgraded to 10
// per second: TAT' = now + 0.5 s, so with burst 5 the next request passes
// after 0.1 s instead of 4.6 s. Burst does not enter the formula: the new τ
// applies to the rescaled TAT at the next admission.
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
	var nowUS int64
	if !now.IsZero() {
		nowUS = now.UnixMicro()
	}
	res, err := lua.GCRARescale.Run(ctx, rdb, []string{keys.Admission(tenant, string(AlgGCRA), new.Name)},
		nowUS, old.Limit, old.Period.Microseconds(), new.Limit, new.Period.Microseconds()).Int64Slice()
	if err != nil {
		return Rescaled{}, fmt.Errorf("limits: rescale %s %s: %w", tenant, new.Name, err)
	}
	if len(res) != 3 {
		return Rescaled{}, fmt.Errorf("limits: rescale %s %s: %w: %d values, want 3", tenant, new.Name, ErrReply, len(res))
	}
	out := Rescaled{Changed: res[0] == 1, Now: time.UnixMicro(res[2])}
	if res[1] > 0 {
		out.TAT = time.UnixMicro(res[1])
	}
	return out, nil
}
