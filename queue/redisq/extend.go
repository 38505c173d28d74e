package redisq

import (
	"context"
	"fmt"
	"sort"

	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// ExtendAll is Extend for every tenant of held at once: one
// lease_extend.lua call per tenant, all in one pipeline (one round trip per
// lease tick for the whole drainer, not one per tenant). It returns the jobs
// whose lease was already lost, per tenant, and the error of each tenant
// whose call failed (the others' answers still count). It implements
// queue.BatchExtender.
func (c *Consumer) ExtendAll(ctx context.Context, held map[string][]*queue.Claimed) (map[string][]*queue.Claimed, map[string]error) {
	tenants := make([]string, 0, len(held))
	for t, jobs := range held {
		if len(jobs) > 0 {
			tenants = append(tenants, t)
		}
	}
	sort.Strings(tenants)
	calls := make([]lua.Call, len(tenants))
	for i, t := range tenants {
		a := extendArgs{Tenant: t, Lease: c.cfg.Lease, Members: make([]string, len(held[t]))}
		for j, job := range held[t] {
			a.Members[j] = job.Token()
		}
		calls[i] = a.Call()
	}
	lost := map[string][]*queue.Claimed{}
	errs := map[string]error{}
	if len(calls) == 0 {
		return lost, errs
	}
	for i, cmd := range lua.Exec(ctx, c.rdb, calls, nil) {
		t := tenants[i]
		v, err := cmd.Result()
		if err != nil {
			errs[t] = queue.Unavailable(fmt.Sprintf("extend %d leases of %s", len(held[t]), t), err)
			continue
		}
		members, err := parseExtend(v)
		if err != nil {
			errs[t] = fmt.Errorf("queue: extend %d leases of %s: %w", len(held[t]), t, err)
			continue
		}
		gone := make(map[string]bool, len(members))
		for _, m := range members {
			gone[m] = true
		}
		for _, job := range held[t] {
			if gone[job.Token()] {
				lost[t] = append(lost[t], job)
			}
		}
	}
	return lost, errs
}
