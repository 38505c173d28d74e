package testenv

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TenantDump returns what tenant's keys hold, by key suffix (the name after
// "sluice:{tenant}"), without the times that differ between two runs of the
// same writes: a hash's updated_at field, the outflow hash (its fields are
// seconds) and the sorted sets' scores. A key without a TTL is also listed,
// as "<suffix> TTL": "none". Two tenants that went through the same writes
// have equal dumps.
func TenantDump(t testing.TB, rdb *redis.Client, tenant string) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	var names []string
	it := rdb.Scan(ctx, 0, "sluice:{"+tenant+"}*", 1000).Iterator()
	for it.Next(ctx) {
		names = append(names, it.Val())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	for _, k := range names {
		short := strings.TrimPrefix(k, "sluice:{"+tenant+"}")
		switch rdb.Type(ctx, k).Val() {
		case "zset":
			m := rdb.ZRange(ctx, k, 0, -1).Val()
			sort.Strings(m)
			out[short] = m
		case "hash":
			h := rdb.HGetAll(ctx, k).Val()
			delete(h, "updated_at")
			if short == ":outflow" {
				h = nil
			}
			out[short] = h
		case "string":
			out[short] = rdb.Get(ctx, k).Val()
		case "list":
			out[short] = rdb.LRange(ctx, k, 0, -1).Val()
		}
		if rdb.PTTL(ctx, k).Val() < 0 {
			out[short+" TTL"] = "none"
		}
	}
	return out
}

// DeleteTenant removes every key of tenant.
func DeleteTenant(t testing.TB, rdb *redis.Client, tenant string) {
	t.Helper()
	ctx := context.Background()
	it := rdb.Scan(ctx, 0, "sluice:{"+tenant+"}*", 1000).Iterator()
	for it.Next(ctx) {
		rdb.Del(ctx, it.Val())
	}
}
