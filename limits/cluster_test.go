package limits

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// admSpreadTenants returns fresh tenants whose keys live on every master of
// the cluster (at least one tenant per master).
func admSpreadTenants(t *testing.T, rdb *redis.ClusterClient) []string {
	t.Helper()
	ctx := context.Background()
	var masters atomic.Int64 // ForEachMaster calls fn concurrently
	if err := rdb.ForEachMaster(ctx, func(context.Context, *redis.Client) error { masters.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for i := 0; len(seen) < int(masters.Load()); i++ {
		if i == 200 {
			t.Fatalf("200 tenants reached only %d of %d masters", len(seen), masters.Load())
		}
		tenant := admTenant(t, rdb)
		node, err := rdb.MasterForKey(ctx, keys.Backlog(tenant))
		if err != nil {
			t.Fatal(err)
		}
		seen[node.Options().Addr] = true
		out = append(out, tenant)
	}
	return out
}

// TestEveryScriptOnCluster is requirement (d): on the 3-master Redis Cluster
// the harness runs, every algorithm decides — alone, and all five together
// with the backlog gate in one script — for tenants on every master, batched
// and not, without CROSSSLOT or any other error. admTenant's cleanup checks
// the keys' TTLs on every master.
func TestEveryScriptOnCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Cluster(t)
	tenants := admSpreadTenants(t, rdb)
	all := make([]Policy, len(admPolicies))
	for i, p := range admPolicies {
		p.Name = "all." + string(p.Algorithm)
		all[i] = p
	}
	for _, mode := range admModes {
		a := admNew(t, rdb, mode.cfg)
		for _, tenant := range tenants {
			if err := rdb.Set(ctx, keys.Backlog(tenant), 1, keys.BacklogTTL).Err(); err != nil {
				t.Fatal(err)
			}
			for _, now := range []time.Time{{}, admAt(1)} {
				for _, p := range admPolicies {
					if _, err := a.Admit(ctx, Request{Tenant: tenant, Policies: []Policy{p}, Now: now}); err != nil {
						t.Errorf("%s %s on tenant %s: %v", mode.name, p.Algorithm, tenant, err)
					}
				}
				d, err := a.Admit(ctx, Request{Tenant: tenant, Policies: all, MaxBacklog: 10, Now: now})
				if err != nil {
					t.Errorf("%s all five + backlog on tenant %s: %v", mode.name, tenant, err)
				} else if d.Backlog != 1 {
					t.Errorf("backlog read as %d, want 1", d.Backlog)
				}
			}
		}
	}
	// Concurrent decisions for tenants on different masters share one
	// batched pipeline, which the cluster client splits per node.
	a := admNew(t, rdb)
	errs := make(chan error, 50*len(tenants))
	for i := range 50 * len(tenants) {
		go func() {
			_, err := a.Admit(ctx, Request{Tenant: tenants[i%len(tenants)], Policies: all})
			errs <- err
		}()
	}
	for range 50 * len(tenants) {
		if err := <-errs; err != nil {
			t.Error(fmt.Errorf("concurrent cluster decision: %w", err))
		}
	}
}
