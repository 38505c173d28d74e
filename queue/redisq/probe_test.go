package redisq_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// TestProbe (a single Redis and a Cluster): Probe reports a tenant with a
// queued job, one with a retry due within the horizon and one with a lease
// past its deadline (also in expired), and not an empty tenant, one whose
// retry is due later, or one whose lease is live; on a Cluster the tenants'
// reads span the nodes of one pipeline. A job pushed without a backlog
// counter is found by the first probe (it reads every queue), not by the
// next one at once (it reads only tenants with a backlog, and the hidden
// tenant's slice has no turn yet), and again within probeFullEvery (its
// slice's turn). A single Redis reads the counters with MGET, a Cluster
// with one GET per tenant.
func TestProbe(t *testing.T) {
	t.Parallel()
	for name, rdb := range map[string]redis.UniversalClient{"single": testenv.Redis(t), "cluster": testenv.Cluster(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			prod, live := takeParts(t, rdb)
			tn := func(s string) string { return testenv.Name(t, s) }
			queued, soon, later, lapsed, leased, empty := tn("queued"), tn("soon"), tn("later"), tn("lapsed"), tn("leased"), tn("empty")
			for _, tenant := range []string{queued, lapsed, leased} {
				if err := prod.Enqueue(ctx, []queue.Envelope{{ID: "j", Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now().UTC()}}); err != nil {
					t.Fatal(err)
				}
			}
			short, err := redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if j, _, err := short.Claim(ctx, lapsed); err != nil || j == nil {
				t.Fatalf("claim %s: %v %v", lapsed, j, err)
			}
			if j, _, err := live.Claim(ctx, leased); err != nil || j == nil {
				t.Fatalf("claim %s: %v %v", leased, j, err)
			}
			now := time.Now()
			for tenant, due := range map[string]time.Time{soon: now.Add(500 * time.Millisecond), later: now.Add(time.Minute)} {
				if err := rdb.ZAdd(ctx, keys.Delayed(tenant), redis.Z{Score: float64(due.UnixMilli()), Member: `{"id":"r"}`}).Err(); err != nil {
					t.Fatal(err)
				}
				if err := rdb.IncrBy(ctx, keys.Backlog(tenant), 1).Err(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { rdb.Del(context.Background(), keys.Delayed(tenant), keys.Backlog(tenant)) })
			}
			hidden := tn("hidden")
			if err := rdb.RPush(ctx, keys.Queue(hidden), `{"v":1,"id":"h","tenant":"`+hidden+`","cost":1}`).Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rdb.Del(context.Background(), keys.Queue(hidden)) })
			time.Sleep(200 * time.Millisecond) // lapsed's lease runs out
			all := []string{queued, soon, later, lapsed, leased, empty, hidden}
			for i, want := range [][]string{{queued, soon, lapsed, hidden}, {queued, soon, lapsed}} {
				ready, expired, err := live.Probe(ctx, all, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ready, want) {
					t.Errorf("probe %d: ready %v, want %v", i+1, ready, want)
				}
				if want := []string{lapsed}; !slices.Equal(expired, want) {
					t.Errorf("probe %d: expired %v, want %v", i+1, expired, want)
				}
			}
			found := false
			for deadline := time.Now().Add(5*time.Second + time.Second); !found && time.Now().Before(deadline); {
				time.Sleep(250 * time.Millisecond)
				ready, _, err := live.Probe(ctx, all, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				found = slices.Contains(ready, hidden)
			}
			if !found {
				t.Errorf("the hidden tenant's queue was not read in full within probeFullEvery (5 s) + 1 s")
			}
		})
	}
}
