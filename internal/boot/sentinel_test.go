package boot_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/boot"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/lua"
)

// TestRedisSentinel: with redis.sentinel, boot.Redis is a failover client
// on the primary (ReadPersistence reads the primary, AOF on); after the
// primary is SIGKILLed and Sentinel promotes the replica, the same client
// writes to the new primary without being rebuilt. The scripts loaded on
// the old primary are not on the new one (a replica gets a script's
// effects, not the script), which lua.Call's NOSCRIPT rule covers.
func TestRedisSentinel(t *testing.T) {
	t.Parallel()
	h := testenv.StartSentinel(t)
	rdb := boot.Redis(config.Redis{Sentinel: config.Sentinel{MasterName: h.MasterName(), Addrs: h.SentinelAddrs()},
		Timeout: 250 * time.Millisecond, PoolSize: 4})
	t.Cleanup(func() { rdb.Close() })
	if _, ok := rdb.(*redis.Client); !ok {
		t.Fatalf("boot.Redis with redis.sentinel = %T, want go-redis's failover *redis.Client", rdb)
	}
	ctx := t.Context()
	ps, err := boot.ReadPersistence(ctx, rdb)
	if err != nil || len(ps) != 1 || ps[0].Addr != h.Primary().Addr() || !ps[0].AOF {
		t.Fatalf("ReadPersistence = %+v, %v; want the primary %s with AOF", ps, err, h.Primary().Addr())
	}
	if err := boot.Scripts(ctx, rdb); err != nil {
		t.Fatalf("Scripts: %v", err)
	}
	if err := rdb.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Do(ctx, "WAIT", 1, 1000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}

	h.KillPrimary()
	promoted := h.WaitFailover(20 * time.Second)
	start := time.Now()
	testenv.WaitFor(t, 10*time.Second, "a write through the same client on the new primary", func() bool {
		return rdb.Set(ctx, "after", "1", 0).Err() == nil
	})
	t.Logf("the client wrote to %s %v after the promotion", promoted, time.Since(start).Round(time.Millisecond))
	if got, err := rdb.Get(ctx, "before").Result(); err != nil || got != "1" {
		t.Errorf("GET before on the new primary = %q, %v; want the write acknowledged by WAIT", got, err)
	}
	if ps, err := boot.ReadPersistence(ctx, rdb); err != nil || len(ps) != 1 || ps[0].Addr != promoted {
		t.Errorf("ReadPersistence after the failover = %+v, %v; want the new primary %s", ps, err, promoted)
	}
	exists, err := rdb.ScriptExists(context.Background(), lua.Enqueue.SHA()).Result()
	if err != nil || len(exists) != 1 || exists[0] {
		t.Errorf("SCRIPT EXISTS enqueue on the new primary = %v, %v; want false (scripts are not replicated)", exists, err)
	}
}
