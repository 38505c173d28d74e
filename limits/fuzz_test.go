package limits

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// fuzzMaxNow is the latest instant FuzzAdmit holds the script to, in unix
// µs (2^52 µs is in the year 2112): the scripts add periods to now in Lua
// doubles.
const fuzzMaxNow = 1 << 52

// FuzzAdmit fuzzes the admission script's arguments through Admitter.Admit
// on the real Redis: one policy's algorithm, limit, period and burst, the
// backlog gate, two costs and two instants. For each input:
//
//   - a policy Policy.Validate refuses, a cost outside [0, MaxCost], a
//     negative max backlog, or an instant before the epoch is an error from
//     Admit and writes nothing;
//   - otherwise, while costs are within [1, MaxCost] and instants within
//     (0, fuzzMaxNow], each of an admission at now, a dry run and a second
//     admission at now+dt returns no error and a Result with Limit =
//     Capacity (the first admission, from an empty state, allowed when the
//     cost is within it), Remaining in [0, Limit], RetryAfter 0 when
//     allowed, Never exactly when the cost exceeds Capacity, else > 0, and
//     ResetAfter >= 0;
//     a dry run changes no key; and the policy's key, when it exists, has a
//     TTL (PTTL > 0).
func FuzzAdmit(f *testing.F) {
	const (
		sec  = int64(time.Second)
		hour = int64(time.Hour)
		maxI = int64(math.MaxInt64)
		now  = int64(1_700_000_040_000_000)
	)
	for _, s := range []struct {
		alg                  uint8 // index into Algorithms; >= 5 is an unknown algorithm
		limit, period, burst int64
	}{
		// The admin changes that broke their tenants.
		{2, 2_000_000, sec, 0},             // gcra 2,000,000 per 1 s
		{2, maxI, sec, 0},                  // limit 2^63−1
		{2, 10, sec, maxI},                 // burst 2^63−1
		{0, maxI, sec, 0},                  // fixed_window limit 2^63−1
		{3, 1<<53 + 1, 2562047 * hour, 0},  // token bucket 2^53+1 per 2562047h
		{3, 1, 2562047 * hour, 1},          // period 2562047h
		{0, 1, 2562047 * hour, 0},          // fixed_window, period 2562047h
		{1, 1, 2562047 * hour, 0},          // sliding_window, period 2562047h
		{4, 1 << 40, hour, 0},              // sliding log 2^40 per 1 h
		{4, MaxLogLimit, hour, 0},          // sliding log at its cap
		{2, 1, int64(time.Millisecond), 0}, // the shortest period
		{2, 1000, int64(time.Millisecond), 0},
		// Ordinary policies.
		{0, 100, sec, 0},
		{1, 1000, 60 * sec, 0},
		{2, 10, sec, 5},
		{3, 5, sec, 10},
		{4, 100, sec, 0},
		{5, 10, sec, 0}, // unknown algorithm
	} {
		for _, c := range [][2]int64{{1, 1}, {3, 7}, {maxI, 1}, {1 << 53, 1}, {0, -1}} {
			f.Add(s.alg, s.limit, s.period, s.burst, c[0], c[1], int64(0), now, s.period/1000/2)
		}
		f.Add(s.alg, s.limit, s.period, s.burst, int64(1), int64(1), int64(0), int64(fuzzMaxNow), int64(-1))
	}
	f.Add(uint8(2), int64(10), sec, int64(5), int64(3), int64(3), int64(2), now, int64(0)) // backlog gate refuses
	f.Add(uint8(0), int64(10), sec, int64(0), int64(1), int64(1), int64(-1), now, int64(0))
	f.Add(uint8(0), int64(10), sec, int64(0), int64(1), int64(1), int64(0), int64(-5), int64(0))

	rdb := testenv.Redis(f)
	a := admNew(f, rdb)
	tenant := admTenant(f, rdb)
	f.Fuzz(func(t *testing.T, alg uint8, limit, period, burst, cost, cost2, maxBacklog, nowUs, dtUs int64) {
		p := Policy{Name: "fz", Algorithm: "unknown", Limit: limit, Period: time.Duration(period), Burst: burst}
		if int(alg) < len(Algorithms) {
			p.Algorithm = Algorithms[alg]
		}
		ctx := context.Background()
		var written []string
		keyAt := func(us int64) string {
			k := fuzzKey(tenant, p, us)
			written = append(written, k)
			return k
		}
		defer func() { rdb.Del(ctx, written...) }()
		rdb.Del(ctx, keyAt(nowUs))

		req := Request{Tenant: tenant, Policies: []Policy{p}, Cost: cost, MaxBacklog: maxBacklog, Now: time.UnixMicro(nowUs)}
		if p.Validate() != nil || cost < 0 || cost > MaxCost || maxBacklog < 0 || nowUs <= 0 {
			if _, err := a.Admit(ctx, req); !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Admit(%+v) = %v, want ErrInvalidRequest (Validate: %v)", req, err, p.Validate())
			}
			if key := keyAt(nowUs); rdb.Exists(ctx, key).Val() != 0 {
				t.Fatalf("Admit(%+v) refused the request but wrote %s", req, key)
			}
			return
		}
		checked := func(c, us int64) bool {
			return (c == 0 || c >= 1 && c <= MaxCost) && us > 0 && us <= fuzzMaxNow
		}
		later := nowUs + dtUs
		if dtUs > 0 && later < nowUs { // overflow
			later = -1
		}
		steps := []struct {
			name string
			cost int64
			now  int64
			dry  bool
		}{
			{"admission", cost, nowUs, false},
			{"dry run", cost2, later, true},
			{"second admission", cost2, later, false},
		}
		for _, st := range steps {
			if st.cost < 0 || st.now <= 0 {
				return
			}
			req.Cost, req.Now, req.DryRun = st.cost, time.UnixMicro(st.now), st.dry
			key := keyAt(st.now)
			var dumpBefore string
			if st.dry {
				dumpBefore = rdb.Dump(ctx, key).Val()
			}
			d, err := a.Admit(ctx, req)
			if st.cost > MaxCost && !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("%s: Admit(%+v) = %v, want ErrInvalidRequest", st.name, req, err)
			}
			if !checked(st.cost, st.now) {
				continue // no panic is all that is asked
			}
			if err != nil {
				t.Fatalf("%s: Admit(%+v): %v", st.name, req, err)
			}
			fuzzCheckResult(t, st.name, req, d)
			if c := max(st.cost, 1); st.name == "admission" && c <= p.Capacity() && !d.Results[0].Allowed {
				t.Fatalf("%s: Admit(%+v) refused cost %d from an empty state, capacity %d: %+v", st.name, req, c, p.Capacity(), d)
			}
			if st.dry {
				// The key may expire meanwhile (its TTL runs in real time, a
				// short period's in a millisecond): only a key that is there
				// and differs was written.
				if after := rdb.Dump(ctx, key).Val(); after != "" && after != dumpBefore {
					t.Fatalf("%s: Admit(%+v) changed %s", st.name, req, key)
				}
			}
			pttl, err := rdb.PTTL(ctx, key).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("PTTL %s: %v", key, err)
			}
			// -2 is no key (nothing admitted yet), -1 a key without a TTL.
			if pttl == -1 || (pttl < 0 && pttl != -2) {
				t.Fatalf("%s: after Admit(%+v) key %s has PTTL %v, want > 0", st.name, req, key, pttl)
			}
		}
	})
}

// fuzzKey is the key of p's state for a decision at nowUs: the policy's
// key, and for fixed_window the window's, key:w with w = floor(now /
// period) (see lua/fixed_window.lua).
func fuzzKey(tenant string, p Policy, nowUs int64) string {
	k := keys.Admission(tenant, string(p.Algorithm), p.Name)
	if us := p.Period.Microseconds(); p.Algorithm == AlgFixedWindow && us > 0 {
		k += ":" + strconv.FormatInt(nowUs/us, 10)
	}
	return k
}

// fuzzCheckResult checks one decision of FuzzAdmit.
func fuzzCheckResult(t *testing.T, step string, req Request, d Decision) {
	t.Helper()
	p := req.Policies[0]
	cost := req.Cost
	if cost == 0 {
		cost = 1
	}
	if len(d.Results) != 1 {
		t.Fatalf("%s: Admit(%+v) = %+v, want one Result", step, req, d)
	}
	r := d.Results[0]
	gated := req.MaxBacklog > 0 && cost > req.MaxBacklog // the backlog key is never written here
	switch {
	case r.Limit != p.Capacity():
		t.Fatalf("%s: Admit(%+v): Limit %d, want Capacity %d", step, req, r.Limit, p.Capacity())
	case r.Remaining < 0 || r.Remaining > r.Limit:
		t.Fatalf("%s: Admit(%+v): Remaining %d outside [0, %d]", step, req, r.Remaining, r.Limit)
	case r.ResetAfter < 0:
		t.Fatalf("%s: Admit(%+v): ResetAfter %v < 0", step, req, r.ResetAfter)
	case r.Allowed && r.RetryAfter != 0:
		t.Fatalf("%s: Admit(%+v): allowed with RetryAfter %v", step, req, r.RetryAfter)
	case (r.RetryAfter == Never) != (cost > p.Capacity()):
		t.Fatalf("%s: Admit(%+v): RetryAfter %v for cost %d and capacity %d, want Never exactly when cost > capacity",
			step, req, r.RetryAfter, cost, p.Capacity())
	case !r.Allowed && r.RetryAfter != Never && r.RetryAfter <= 0:
		t.Fatalf("%s: Admit(%+v): refused with RetryAfter %v, want > 0", step, req, r.RetryAfter)
	case d.Allowed != (r.Allowed && !gated):
		t.Fatalf("%s: Admit(%+v): Decision.Allowed %v, policy allowed %v, backlog gate refuses %v", step, req, d.Allowed, r.Allowed, gated)
	case gated && d.Violated != ViolatedBacklog:
		t.Fatalf("%s: Admit(%+v): Violated %q, want %q", step, req, d.Violated, ViolatedBacklog)
	}
}
