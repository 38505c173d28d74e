package tenants

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
)

// TestRunKeepsRuntimeTenants: a registry's Run refreshes the TTLs of the
// runtime tenants' keys at its start (and daily), so a tenant left
// unchanged does not vanish when keys.OverrideTTL passes after its last
// write. The keys are given a minute to live; Run puts them back at
// OverrideTTL.
func TestRunKeepsRuntimeTenants(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	r, _ := startRegistry(t, rdb, baseConfig(t), RegistryConfig{})
	if _, err := r.Put(ctx, "old", config.Tenant{APIKeys: []string{config.HashKey("key-old")}}, "alice", testAt); err != nil {
		t.Fatal(err)
	}
	ks := []string{keys.Tenants(), keys.TenantsVersion(), keys.Override("old"), keys.Audit("old")}
	for _, k := range ks {
		rdb.PExpire(ctx, k, time.Minute)
	}
	startRegistry(t, rdb, baseConfig(t), RegistryConfig{}) // its Run keeps them at start
	deadline := time.Now().Add(5 * time.Second)
	for _, k := range ks {
		for rdb.PTTL(ctx, k).Val() < keys.OverrideTTL-time.Hour && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if ttl := rdb.PTTL(ctx, k).Val(); ttl < keys.OverrideTTL-time.Hour {
			t.Errorf("%s: TTL %v after a registry started, want about %v", k, ttl, keys.OverrideTTL)
		}
	}
}
