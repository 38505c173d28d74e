package limits_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
)

// A tenant on 1 request per second with a burst of 5 spends its burst and is
// upgraded to 10 per second: its debt of 5 requests is rescaled from 5 s to
// 0.5 s, so its next request waits 0.1 s instead of 4.6 s.
func ExampleRescaleGCRA() {
	rdb := admitExampleRedis()
	defer rdb.Close()
	ctx := context.Background()
	a, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		fmt.Println(err)
		return
	}
	tenant := admitExampleTenant()
	defer rdb.Del(ctx, keys.Admission(tenant, "gcra", "tenant"))
	basic := limits.Policy{Name: "tenant", Algorithm: limits.AlgGCRA, Limit: 1, Period: time.Second, Burst: 5}
	pro := limits.Policy{Name: "tenant", Algorithm: limits.AlgGCRA, Limit: 10, Period: time.Second, Burst: 5}
	now := time.UnixMicro(10_000_000)
	if _, err := a.Admit(ctx, limits.Request{Tenant: tenant, Policies: []limits.Policy{basic}, Cost: 5, Now: now}); err != nil {
		fmt.Println(err)
		return
	}
	res, err := limits.RescaleGCRA(ctx, rdb, tenant, basic, pro, now)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("debt after the upgrade:", res.TAT.Sub(now))
	d, err := a.Admit(ctx, limits.Request{Tenant: tenant, Policies: []limits.Policy{pro}, Now: now})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("next request: allowed", d.Allowed, "retry after", d.Results[0].RetryAfter)
	// Output:
	// debt after the upgrade: 500ms
	// next request: allowed false retry after 100ms
}
