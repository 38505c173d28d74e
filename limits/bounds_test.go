package limits

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// boundCase is one side of one bound of Policy.Validate.
type boundCase struct {
	name string
	p    Policy
	// field is "" when Validate accepts p, else the field it must name.
	field string
	// breaks says that the admission script, called with p anyway (past
	// the validator), answers a fresh tenant's request of one unit with an
	// error or a result outside its contract. Refused cases without it are
	// bounds kept for a reason a single call does not show (the comment
	// says which).
	breaks bool
}

// boundCases walks every bound of Policy.Validate from both sides: the
// largest value it accepts and the smallest it refuses, per algorithm and
// field, plus the seven admin changes of issue 7 that were stored and then
// broke their tenant.
func boundCases() []boundCase {
	const sec = int64(time.Second / time.Microsecond)
	hourUS := int64(time.Hour / time.Microsecond)
	maxPeriodUS := int64(MaxPeriod / time.Microsecond)
	pol := func(alg Algorithm, limit int64, period time.Duration, burst int64) Policy {
		return Policy{Name: "tenant", Algorithm: alg, Limit: limit, Period: period, Burst: burst}
	}
	var cs []boundCase
	for _, alg := range Algorithms {
		a := string(alg)
		limit := sec // one unit per µs of 1s
		if alg == AlgSlidingLog {
			limit = MaxLogLimit
		}
		cs = append(cs,
			boundCase{name: a + "/limit 1", p: pol(alg, 1, time.Second, 0)},
			boundCase{name: a + "/limit 0", p: pol(alg, 0, time.Second, 0), field: "limit"},
			boundCase{name: a + "/period 1ms", p: pol(alg, 1, time.Millisecond, 0)},
			// 999µs works in the script; 1ms is the floor of every TTL (PX).
			boundCase{name: a + "/period 999µs", p: pol(alg, 1, 999*time.Microsecond, 0), field: "period"},
			boundCase{name: a + "/period max", p: pol(alg, 1, MaxPeriod, 0)},
			// A day past the year still computes; MaxPeriod is the round
			// bound that keeps now + 2 periods far below 2^53 µs.
			boundCase{name: a + "/period max+1ms", p: pol(alg, 1, MaxPeriod+time.Millisecond, 0), field: "period"},
			boundCase{name: a + "/burst -1", p: pol(alg, 1, time.Second, -1), field: "burst"},
		)
		if alg != AlgSlidingLog {
			cs = append(cs,
				boundCase{name: a + "/limit = period µs", p: pol(alg, limit, time.Second, 0)},
				// gcra's emission interval ⌈period/limit⌉ rounds up to
				// 1 µs: the script would enforce 10^6/s, not the limit.
				boundCase{name: a + "/limit = period µs + 1", p: pol(alg, limit+1, time.Second, 0), field: "limit"},
			)
		}
	}
	for _, alg := range []Algorithm{AlgGCRA, AlgTokenBucket} {
		a := string(alg)
		maxB := (MaxExact - 1) / sec
		cs = append(cs,
			boundCase{name: a + "/burst × period < 2^53", p: pol(alg, 1, time.Second, maxB)},
			boundCase{name: a + "/burst × period >= 2^53", p: pol(alg, 1, time.Second, maxB+1), field: "burst"},
			boundCase{name: a + "/limit × period >= 2^53 (burst defaults to limit)", p: pol(alg, maxPeriodUS/8, MaxPeriod, 0), field: "limit"},
			boundCase{name: a + "/burst × max period < 2^53", p: pol(alg, 1, MaxPeriod, (MaxExact-1)/maxPeriodUS)},
		)
	}
	maxL := (MaxExact - 1) / hourUS
	cs = append(cs,
		boundCase{name: "sliding_window/limit × period < 2^53", p: pol(AlgSlidingWindow, maxL, time.Hour, 0)},
		boundCase{name: "sliding_window/limit × period >= 2^53", p: pol(AlgSlidingWindow, maxL+1, time.Hour, 0), field: "limit"},
		// One sorted-set member per unit: 100,001 members per key is not
		// an error, only memory the cap keeps bounded.
		boundCase{name: "sliding_log/limit cap+1", p: pol(AlgSlidingLog, MaxLogLimit+1, time.Second, 0), field: "limit"},

		// The admin changes of issue 7.
		boundCase{name: "repro/gcra 2,000,000 per 1s", p: pol(AlgGCRA, 2_000_000, time.Second, 0), field: "limit"},
		boundCase{name: "repro/gcra limit 2^63-1", p: pol(AlgGCRA, math.MaxInt64, time.Second, 0), field: "limit", breaks: true},
		boundCase{name: "repro/fixed_window limit 2^63-1", p: pol(AlgFixedWindow, math.MaxInt64, time.Second, 0), field: "limit", breaks: true},
		boundCase{name: "repro/gcra burst 2^63-1", p: pol(AlgGCRA, 10, time.Second, math.MaxInt64), field: "burst", breaks: true},
		boundCase{name: "repro/token_bucket 2^53+1", p: pol(AlgTokenBucket, MaxExact+1, time.Second, 0), field: "limit", breaks: true},
		// Its reset of two periods overflowed a time.Duration (a negative
		// ResetAfter) until limits.micros saturated; the period bound refuses
		// it all the same.
		boundCase{name: "repro/sliding_window period 2562047h", p: pol(AlgSlidingWindow, 1, 2562047*time.Hour, 0), field: "period"},
		boundCase{name: "repro/gcra period 2562047h", p: pol(AlgGCRA, 1, 2562047*time.Hour, 0), field: "period"},
		boundCase{name: "repro/sliding_log 2^40 per 1h", p: pol(AlgSlidingLog, 1<<40, time.Hour, 0), field: "limit"},
	)
	return cs
}

// TestPolicyBoundsAgainstScript shows that Policy.Validate and the admission
// script agree on a real Redis: every policy Validate accepts is admitted
// by the Admitter without an error and with a result inside its contract,
// and its refusals are answered Never without an error; every policy it
// refuses names its field (and, where a single call can show it, the script
// called with it anyway errs or answers outside its contract).
func TestPolicyBoundsAgainstScript(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	adm := admNew(t, rdb)
	now := admAt(0)
	for _, c := range boundCases() {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			var pe *PolicyError
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", c.p, err)
				}
				tenant := admTenant(t, rdb)
				d, err := adm.Admit(ctx, Request{Tenant: tenant, Policies: []Policy{c.p}, Now: now})
				if err != nil {
					t.Fatalf("Admit: %v", err)
				}
				if bad := outsideContract(c.p, d); bad != "" {
					t.Errorf("Admit = %+v: %s", d, bad)
				}
				over := c.p.Capacity() + 1
				d, err = adm.Admit(ctx, Request{Tenant: tenant, Policies: []Policy{c.p}, Cost: over, Now: now})
				if err != nil {
					t.Fatalf("Admit cost %d: %v", over, err)
				}
				if d.Allowed || d.Results[0].RetryAfter != Never || d.Results[0].Limit != c.p.Capacity() {
					t.Errorf("Admit cost capacity+1 = %+v, want refused with RetryAfter Never and Limit %d", d, c.p.Capacity())
				}
				return
			}
			if !errors.As(err, &pe) || pe.Field != c.field {
				t.Fatalf("Validate(%+v) = %v, want a *PolicyError naming %q", c.p, err, c.field)
			}
			if _, err := adm.Admit(ctx, Request{Tenant: "t", Policies: []Policy{c.p}, Now: now}); err == nil {
				t.Errorf("Admit accepted a policy Validate refuses")
			}
			if !c.breaks {
				return
			}
			tenant := admTenant(t, rdb)
			d, err := rawAdmit(ctx, rdb, tenant, c.p, now)
			bad := "an error: " + fmt.Sprint(err)
			if err == nil {
				bad = outsideContract(c.p, d)
			}
			if bad == "" {
				t.Errorf("the script, past the validator, admitted %+v within its contract (%+v); the bound is not what breaks it", c.p, d)
			}
			t.Logf("the script past the validator: %s", bad)
		})
	}
}

// outsideContract says how d, the answer to a fresh tenant's one-unit
// request under p, breaks the script's contract ("" when it does not):
// admitted, Limit = Capacity, Remaining = Capacity − 1, no retry, and a
// reset after in (0, 2 × Period].
func outsideContract(p Policy, d Decision) string {
	if !d.Allowed || len(d.Results) != 1 {
		return fmt.Sprintf("not admitted (violated %q)", d.Violated)
	}
	r := d.Results[0]
	horizon := time.Duration(math.MaxInt64)
	if p.Period < horizon/2 {
		horizon = 2 * p.Period
	}
	switch {
	case r.Limit != p.Capacity():
		return fmt.Sprintf("limit %d, want %d", r.Limit, p.Capacity())
	case r.Remaining != p.Capacity()-1:
		return fmt.Sprintf("remaining %d, want %d", r.Remaining, p.Capacity()-1)
	case r.RetryAfter != 0:
		return fmt.Sprintf("retry after %v, want 0", r.RetryAfter)
	case r.ResetAfter <= 0 || r.ResetAfter > horizon:
		return fmt.Sprintf("reset after %v, want in (0, %v]", r.ResetAfter, horizon)
	}
	return ""
}

// rawAdmit runs the admission script with p as it is, without Validate: what
// a tenant whose policy slipped past validation would get.
func rawAdmit(ctx context.Context, rdb redis.UniversalClient, tenant string, p Policy, now time.Time) (Decision, error) {
	e := &encoded{
		now:  now.UnixMicro(),
		keys: []string{keys.Admission(tenant, string(p.Algorithm), p.Name)},
		cost: 1,
		pols: []polRef{{def: &encodedPolicy{args: [4]any{string(p.Algorithm), p.Limit, p.Period.Microseconds(), p.burst()}}, cost: 1}},
	}
	reply, err := admitCall(lua.Admit(), []*encoded{e}).Run(ctx, rdb).Result()
	if err != nil {
		return Decision{}, err
	}
	var out [1]answer
	if err := splitReply(lua.Admit(), reply, []*encoded{e}, out[:]); err != nil {
		return Decision{}, err
	}
	if out[0].err != nil {
		return Decision{}, out[0].err
	}
	return decode(lua.Admit(), Request{Tenant: tenant, Policies: []Policy{p}}, out[0].reply)
}
