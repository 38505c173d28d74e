package limits

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// admPolicies is one Limit-3 policy per algorithm.
var admPolicies = []Policy{
	{Name: "tenant", Algorithm: AlgFixedWindow, Limit: 3, Period: 10 * time.Second},
	{Name: "tenant", Algorithm: AlgSlidingWindow, Limit: 3, Period: 10 * time.Second},
	{Name: "tenant", Algorithm: AlgGCRA, Limit: 3, Period: 3 * time.Second, Burst: 3},
	{Name: "tenant", Algorithm: AlgTokenBucket, Limit: 3, Period: 3 * time.Second, Burst: 3},
	{Name: "tenant", Algorithm: AlgSlidingLog, Limit: 3, Period: 10 * time.Second},
}

// TestDenialDoesNotAdvanceState fills each algorithm, then refuses requests
// (over the limit, over what can ever pass, and later but still refused) and
// checks that the tenant's keys are byte-for-byte unchanged (DUMP).
func TestDenialDoesNotAdvanceState(t *testing.T) {
	t.Parallel()
	// A private Redis: the keys are read with SCAN, which on a shared Redis
	// holding many keys can outlast the GCRA state's 3-s TTL.
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	a := admNew(t, rdb)
	for _, p := range admPolicies {
		t.Run(string(p.Algorithm), func(t *testing.T) {
			tenant := admTenant(t, rdb)
			if r := admOne(t, a, tenant, p, 1, admAt(1)); !r.Allowed {
				t.Fatalf("first unit refused: %+v", r)
			}
			if r := admOne(t, a, tenant, p, 2, admAt(1.2)); !r.Allowed {
				t.Fatalf("units 2-3 refused: %+v", r)
			}
			before := admDump(t, rdb, tenant)
			for _, q := range []struct {
				at   float64
				cost int64
			}{{1.2, 1}, {1.2, 2}, {1.2, 4}, {1.4, 1}, {1.5, 3}} {
				if r := admOne(t, a, tenant, p, q.cost, admAt(q.at)); r.Allowed {
					t.Fatalf("cost %d at +%vs admitted, want refused: %+v", q.cost, q.at, r)
				}
			}
			if diff := cmp.Diff(before, admDump(t, rdb, tenant)); diff != "" {
				t.Errorf("refusals changed state (-before +after):\n%s", diff)
			}
		})
	}
}

// TestAllOrNothing checks that a policy which admits is not charged when
// another policy of the same request refuses.
func TestAllOrNothing(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	for _, mode := range admModes {
		t.Run(mode.name, func(t *testing.T) {
			a := admNew(t, rdb, mode.cfg)
			tenant := admTenant(t, rdb)
			tp := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 10, Period: 10 * time.Second}
			typ := Policy{Name: "type.encode", Algorithm: AlgFixedWindow, Limit: 2, Period: time.Minute}
			req := Request{Tenant: tenant, Policies: []Policy{tp, typ}, Now: admAt(1)}
			for i := range 2 {
				d, err := a.Admit(context.Background(), req)
				if err != nil || !d.Allowed {
					t.Fatalf("request %d: %+v, %v; want admitted", i, d, err)
				}
			}
			tenantKey := keys.Admission(tenant, "gcra", "tenant")
			before, _ := rdb.Dump(context.Background(), tenantKey).Result()
			d, err := a.Admit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := Decision{Allowed: false, Violated: "type.encode", Results: []Result{
				{Policy: "tenant", Allowed: true, Limit: 10, Remaining: 8, ResetAfter: 2 * time.Second},
				{Policy: "type.encode", Allowed: false, Limit: 2, Remaining: 0, RetryAfter: 59 * time.Second, ResetAfter: 59 * time.Second},
			}}
			if diff := cmp.Diff(want, d); diff != "" {
				t.Errorf("third request (-want +got):\n%s", diff)
			}
			if after, _ := rdb.Dump(context.Background(), tenantKey).Result(); after != before {
				t.Errorf("the tenant policy's state changed although the type policy refused")
			}
		})
	}
}

// TestPerPolicyCosts: a batch of 3 jobs, one of them of type encode, is
// charged 3 units by the tenant policy and 1 by the type policy.
func TestPerPolicyCosts(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	for _, mode := range admModes {
		t.Run(mode.name, func(t *testing.T) {
			a := admNew(t, rdb, mode.cfg)
			tenant := admTenant(t, rdb)
			tp := Policy{Name: "tenant", Algorithm: AlgFixedWindow, Limit: 10, Period: time.Minute}
			typ := Policy{Name: "type.encode", Algorithm: AlgFixedWindow, Limit: 2, Period: time.Minute}
			req := Request{Tenant: tenant, Policies: []Policy{tp, typ}, Cost: 3, Costs: []int64{0, 1}, Now: admAt(1)}
			d, err := a.Admit(context.Background(), req)
			if err != nil || !d.Allowed {
				t.Fatalf("batch: %+v, %v; want admitted", d, err)
			}
			if got := []int64{d.Results[0].Remaining, d.Results[1].Remaining}; !cmp.Equal(got, []int64{7, 1}) {
				t.Errorf("remaining (tenant, type) = %v, want [7 1]", got)
			}
			if _, err := a.Admit(context.Background(), Request{Tenant: tenant, Policies: []Policy{tp}, Costs: []int64{1, 1}}); err == nil {
				t.Error("Admit with 2 costs for 1 policy = nil error, want one")
			}
		})
	}
}

// TestDryRunWritesNothing: a dry run reports each algorithm's state as it
// is and leaves it byte-for-byte unchanged.
func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	a := admNew(t, rdb)
	for _, p := range admPolicies {
		t.Run(string(p.Algorithm), func(t *testing.T) {
			// Long periods, so the state's real-time TTL cannot run out
			// between the DUMPs on a loaded machine.
			p.Period *= 100
			tenant := admTenant(t, rdb)
			if r := admOne(t, a, tenant, p, 1, admAt(1)); !r.Allowed {
				t.Fatalf("first unit refused: %+v", r)
			}
			before := admDump(t, rdb, tenant)
			for range 5 {
				d, err := a.Admit(context.Background(), Request{Tenant: tenant, Policies: []Policy{p}, DryRun: true, Now: admAt(1)})
				if err != nil || !d.Allowed || d.Results[0].Remaining != 2 {
					t.Fatalf("dry run: %+v, %v; want allowed with 2 remaining", d, err)
				}
			}
			if diff := cmp.Diff(before, admDump(t, rdb, tenant)); diff != "" {
				t.Errorf("dry runs changed state (-before +after):\n%s", diff)
			}
		})
	}
}

// TestBacklogGate: with max_backlog 10 a cost-1 job passes at backlog 9 and
// is refused at 10 (and a cost-2 job at 9), without charging any policy.
func TestBacklogGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	a := admNew(t, rdb)
	tenant := admTenant(t, rdb)
	// One unit per 36 s: the bucket's key outlives the test on a slow host.
	p := Policy{Name: "tenant", Algorithm: AlgTokenBucket, Limit: 100, Period: time.Hour}
	setBacklog := func(n int64) {
		if err := rdb.Set(ctx, keys.Backlog(tenant), n, keys.BacklogTTL).Err(); err != nil {
			t.Fatal(err)
		}
	}
	admit := func(cost int64) Decision {
		d, err := a.Admit(ctx, Request{Tenant: tenant, Policies: []Policy{p}, Cost: cost, MaxBacklog: 10, Now: admAt(1)})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	setBacklog(9)
	if d := admit(1); !d.Allowed || d.Backlog != 9 || d.Violated != "" {
		t.Fatalf("backlog 9, cost 1: %+v, want admitted with Backlog 9", d)
	}
	before := admDump(t, rdb, tenant)
	if d := admit(2); d.Allowed || d.Violated != ViolatedBacklog {
		t.Errorf("backlog 9, cost 2: %+v, want refused by backlog", d)
	}
	setBacklog(10)
	before[keys.Backlog(tenant)] = rdb.Dump(ctx, keys.Backlog(tenant)).Val()
	d := admit(1)
	want := Decision{Allowed: false, Violated: ViolatedBacklog, Backlog: 10, Results: []Result{
		{Policy: "tenant", Allowed: true, Limit: 100, Remaining: 99, ResetAfter: 36 * time.Second},
	}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("backlog 10, cost 1 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, admDump(t, rdb, tenant)); diff != "" {
		t.Errorf("backlog refusals changed state (-before +after):\n%s", diff)
	}
	// No gate: the backlog is neither read nor enforced.
	dd, err := a.Admit(ctx, Request{Tenant: tenant, Policies: []Policy{p}, Now: admAt(1)})
	if err != nil || !dd.Allowed || dd.Backlog != 0 {
		t.Errorf("MaxBacklog 0: %+v, %v; want admitted, Backlog 0", dd, err)
	}
}

// TestCostN: a request of N units counts N, all or nothing, for every
// algorithm; sliding_log stores N distinct members even at one instant.
func TestCostN(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	a := admNew(t, rdb)
	for _, p := range admPolicies {
		t.Run(string(p.Algorithm), func(t *testing.T) {
			tenant := admTenant(t, rdb)
			steps := []struct {
				cost    int64
				allowed bool
				remain  int64
			}{
				{2, true, 1},  // 2 of 3
				{2, false, 1}, // would be 4
				{1, true, 0},  // exactly 3
				{3, false, 0},
			}
			for i, s := range steps {
				r := admOne(t, a, tenant, p, s.cost, admAt(2))
				if r.Allowed != s.allowed || r.Remaining != s.remain {
					t.Errorf("step %d, cost %d: Allowed %v Remaining %d, want %v and %d", i, s.cost, r.Allowed, r.Remaining, s.allowed, s.remain)
				}
			}
			if p.Algorithm == AlgSlidingLog {
				n := rdb.ZCard(ctx, keys.Admission(tenant, string(p.Algorithm), p.Name)).Val()
				if n != 3 {
					t.Errorf("sliding_log holds %d members after costs 2 and 1 at one instant, want 3", n)
				}
			}
			fresh := admTenant(t, rdb)
			if r := admOne(t, a, fresh, p, 3, admAt(2)); !r.Allowed || r.Remaining != 0 {
				t.Errorf("cost 3 = capacity on an empty state: %+v, want admitted with 0 remaining", r)
			}
			if r := admOne(t, a, admTenant(t, rdb), p, 4, admAt(2)); r.Allowed || r.RetryAfter != Never {
				t.Errorf("cost 4 > capacity: %+v, want refused with RetryAfter Never", r)
			}
		})
	}
}

// TestNoKeyWithoutTTL runs every algorithm on Redis TIME and at explicit
// instants, admitted and refused, with the backlog gate, in one request and
// alone. admTenant's cleanup then checks that every key has a TTL (c).
func TestNoKeyWithoutTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	a := admNew(t, rdb)
	tenant := admTenant(t, rdb)
	if err := rdb.Set(ctx, keys.Backlog(tenant), 0, keys.BacklogTTL).Err(); err != nil {
		t.Fatal(err)
	}
	all := make([]Policy, len(admPolicies))
	for i, p := range admPolicies {
		p.Name = "all." + string(p.Algorithm)
		all[i] = p
	}
	for _, now := range []time.Time{{}, admAt(1), admAt(7.5)} {
		for range 5 {
			if _, err := a.Admit(ctx, Request{Tenant: tenant, Policies: all, MaxBacklog: 100, Now: now}); err != nil {
				t.Fatal(err)
			}
			for _, p := range admPolicies {
				admOne(t, a, tenant, p, 1, now)
			}
		}
	}
	if n := len(admKeys(t, rdb, tenant)); n < 2*len(admPolicies) {
		t.Fatalf("only %d keys written, want at least %d", n, 2*len(admPolicies))
	}
}
