package limits

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// submitThen is submit.lua's enqueue part for one job of tenant (the
// layout of lua/submit.lua's header), with stateTTL as its state TTL in ms.
func submitThen(tenant, id string, stateTTL int64) Then {
	return Then{
		Keys: []string{keys.Queue(tenant), keys.Backlog(tenant), keys.JobSeq(tenant), keys.JobsDispatched(tenant), keys.JobState(tenant, id)},
		Args: []any{1, 0, keys.QueueTTL.Milliseconds(), keys.BacklogTTL.Milliseconds(), 1, stateTTL,
			`{"v":1,"id":"` + id + `","tenant":"` + tenant + `","type":"t","cost":1}`, "t", 1, 1, 0},
	}
}

// tenantState returns every key of tenant ("sluice:{tenant}*").
func tenantState(t *testing.T, rdb redis.UniversalClient, tenant string) []string {
	t.Helper()
	ks, err := rdb.Keys(context.Background(), "sluice:{"+tenant+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// TestSubmitAllOrNothing, in every Admitter mode: an admitted Submit
// charges the policy and enqueues (queue length and backlog in the reply);
// a refused one and one whose enqueue part is malformed write nothing at
// all, the policy included.
func TestSubmitAllOrNothing(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	pol := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 1, Period: time.Hour, Burst: 1}
	for _, mode := range admModes {
		t.Run(mode.name, func(t *testing.T) {
			a := admNew(t, rdb, mode.cfg)
			ctx := context.Background()
			bad := admTenant(t, rdb)
			_, err := a.Submit(ctx, Request{Tenant: bad, Policies: []Policy{pol}, Now: admAt(1)}, submitThen(bad, "j1", 0))
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				t.Fatalf("malformed enqueue part: err %v, want a Redis error reply", err)
			}
			if ks := tenantState(t, rdb, bad); len(ks) != 0 {
				t.Errorf("malformed submit wrote %v", ks)
			}

			tenant := admTenant(t, rdb)
			s, err := a.Submit(ctx, Request{Tenant: tenant, Policies: []Policy{pol}, Now: admAt(1)}, submitThen(tenant, "j1", 60000))
			if err != nil || !s.Allowed || s.QueueLength != 1 || s.Backlog != 1 {
				t.Fatalf("first submit = %+v, %v; want admitted, queue 1, backlog 1", s, err)
			}
			before := admDump(t, rdb, tenant)
			n := len(tenantState(t, rdb, tenant))
			s, err = a.Submit(ctx, Request{Tenant: tenant, Policies: []Policy{pol}, Now: admAt(2)}, submitThen(tenant, "j2", 60000))
			if err != nil || s.Allowed || s.Violated != "tenant" || s.QueueLength != 0 {
				t.Fatalf("second submit = %+v, %v; want refused by tenant", s, err)
			}
			if got := len(tenantState(t, rdb, tenant)); got != n {
				t.Errorf("refusal: %d keys, want %d", got, n)
			}
			after := admDump(t, rdb, tenant)
			for k, v := range before {
				if after[k] != v {
					t.Errorf("refusal changed %s", k)
				}
			}
			if l, _ := rdb.LLen(ctx, keys.Queue(tenant)).Result(); l != 1 {
				t.Errorf("queue length %d after the refusal, want 1", l)
			}
		})
	}
}
