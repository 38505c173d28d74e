package drainer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// TestRedisBlipDeliversOnce (Redis backend): a redis-server killed while
// deliveries are in flight and started again 2 s later (append-only file,
// every write synced) costs no job a second delivery: the finishes that
// got no reply are sent again, the jobs' leases kept meanwhile, until Redis
// answers. Before, each such job was let go, its lease expired, and it was
// delivered again a lease later.
func TestRedisBlipDeliversOnce(t *testing.T) {
	t.Parallel()
	proc := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	tenant := testenv.Name(t, "blip")
	var mu sync.Mutex
	got := map[string]int{}
	cons := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: 6 * time.Second, Poll: 10 * time.Millisecond}))
	st := settings()
	st.Lease = 6 * time.Second
	start(t, drainer.Config{Consumer: cons, Redis: rdb, Settings: st, MaxInFlight: 20,
		Tenants: map[string]config.Tenant{tenant: tenantCfg("", config.Outflow{})},
		Handler: drainer.HandlerFunc(func(_ context.Context, env queue.Envelope) error {
			time.Sleep(300 * time.Millisecond)
			mu.Lock()
			got[env.ID]++
			mu.Unlock()
			return nil
		})})
	const n = 200
	push(t, rdb, jobs(tenant, n)...)
	count := func() (distinct, total int) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range got {
			total += c
		}
		return len(got), total
	}
	testenv.WaitFor(t, 20*time.Second, "deliveries under way", func() bool { d, _ := count(); return d >= 20 })
	proc.Kill()
	time.Sleep(2 * time.Second)
	proc.Start()
	testenv.WaitFor(t, 60*time.Second, "every job delivered", func() bool { d, _ := count(); return d == n })
	time.Sleep(8 * time.Second) // past a lease: a job let go during the blip would come again by now
	if d, total := count(); total != d {
		mu.Lock()
		var twice []string
		for id, c := range got {
			if c > 1 {
				twice = append(twice, id)
			}
		}
		mu.Unlock()
		t.Errorf("%d deliveries of %d jobs; delivered more than once: %v", total, d, twice)
	}
	ctx := context.Background()
	if left := rdb.ZCard(ctx, keys.Processing(tenant)).Val() + rdb.LLen(ctx, keys.Queue(tenant)).Val(); left != 0 {
		t.Errorf("%d jobs still leased or queued, want none", left)
	}
}
