package drainer_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue/redisq"
	"github.com/sluicehq/sluice/tenants"
)

// TestDrainerFollowsRuntimeTenants wires a drainer to a tenants.Registry as
// cmd/drainer does and changes tenants at runtime: a tenant created through
// the registry is drained at once (well within 1 s, not at the next 2 s
// discovery), a deleted tenant's lane stops and leaves its jobs queued, and
// they are delivered when the tenant comes back.
func TestDrainerFollowsRuntimeTenants(t *testing.T) {
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	s := newSink(t, nil)

	base, err := config.Parse([]byte("tenants:\n  old: {target: {url: " + s.srv.URL + "}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tenants.NewRegistry(tenants.RegistryConfig{Redis: rdb, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	d, err := drainer.New(drainer.Config{
		Consumer: mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: 3 * time.Second, Poll: 10 * time.Millisecond})),
		Redis:    rdb, Tenants: reg.Config().Tenants, Settings: settings(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	regDone, drainDone := make(chan struct{}), make(chan error, 1)
	go func() { defer close(regDone); _ = reg.Run(rctx, func(c *config.Config) { d.SetTenants(c.Tenants) }) }()
	go func() { drainDone <- d.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		<-regDone
		if err := <-drainDone; err != nil {
			t.Errorf("drainer Run: %v", err)
		}
	})

	push(t, rdb, jobs("old", 2)...)
	testenv.WaitFor(t, 2*time.Second, "jobs of the file tenant", func() bool { return s.count("old") == 2 })

	// A runtime tenant with queued jobs: drained as soon as it exists.
	push(t, rdb, jobs("new", 3)...)
	start := time.Now()
	if _, err := reg.Put(ctx, "new", config.Tenant{Target: config.Target{URL: s.srv.URL}}, "alice", time.Now()); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Second, "jobs of the new tenant within 1 s", func() bool { return s.count("new") == 3 })
	t.Logf("new tenant's 3 jobs delivered %v after its creation", time.Since(start))

	// Deleted: its lane stops; a job queued afterwards waits.
	if _, err := reg.Delete(ctx, "old", "bob", time.Now()); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Second, "the drainer to drop the tenant", func() bool { _, ok := d.Target("old", "mail"); return !ok })
	push(t, rdb, jobs("old", 1)[0])
	// A negative result needs a window: 300 ms is 30 claim polls.
	time.Sleep(300 * time.Millisecond)
	if n := s.count("old"); n != 2 {
		t.Errorf("deleted tenant: %d deliveries, want still 2", n)
	}
	if n, _ := rdb.LLen(ctx, keys.Queue("old")).Result(); n != 1 {
		t.Errorf("deleted tenant's queue holds %d jobs, want 1 (kept, not dead-lettered)", n)
	}
	if n, _ := rdb.ZCard(ctx, keys.JobIndex("old", "dead")).Result(); n != 0 {
		t.Errorf("deleted tenant's DLQ holds %d jobs, want 0", n)
	}

	// Back: the waiting job goes.
	if _, err := reg.Put(ctx, "old", config.Tenant{Target: config.Target{URL: s.srv.URL}}, "alice", time.Now()); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Second, "the waiting job after the tenant came back", func() bool { return s.count("old") == 3 })
}
