package drainer_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// produce queues jobs through the real Redis producer, which records their
// state (package jobstate), unlike push.
func produce(t testing.TB, rdb redis.UniversalClient, jobs ...queue.Envelope) {
	t.Helper()
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobs {
		if jobs[i].Cost == 0 {
			jobs[i].Cost = 1
		}
	}
	if err := p.Enqueue(context.Background(), jobs); err != nil {
		t.Fatal(err)
	}
}

// TestDrainerQueueDepthGauge: sluice_queue_depth{tenant} follows the
// tenant's backlog (jobs in flight still count until finished) and loses
// its series when the tenant leaves the configuration.
func TestDrainerQueueDepthGauge(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "depth")
	release := make(chan struct{})
	h := drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	produce(t, rdb, jobs(tenant, 5)...)
	reg := prometheus.NewRegistry()
	d, err := drainer.New(drainer.Config{
		Consumer: mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: 3 * time.Second, Poll: 10 * time.Millisecond})),
		Redis:    rdb, Settings: settings(), Handler: h, Registerer: reg,
		Tenants: map[string]config.Tenant{tenant: {Outflow: config.Outflow{Concurrency: 1}}},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { unblock(); cancel(); <-done })

	depth := func() (float64, bool) {
		return testenv.Metric(t, reg, "sluice_queue_depth", map[string]string{"tenant": tenant})
	}
	// Sampled at start and every 2 s.
	testenv.WaitFor(t, 3*time.Second, "depth 5 with one job in flight and four queued", func() bool { v, ok := depth(); return ok && v == 5 })
	unblock()
	testenv.WaitFor(t, 5*time.Second, "depth 0 once every job is done", func() bool { v, ok := depth(); return ok && v == 0 })
	d.SetTenants(map[string]config.Tenant{})
	testenv.WaitFor(t, 3*time.Second, "the removed tenant's series gone", func() bool { _, ok := depth(); return !ok })
}

// TestDrainerDropsJobCancelledAfterClaim: a job cancelled while it waits
// for its turn in the tenant's outflow bucket (at the head of the queue:
// the Redis backend's take pops a shaped tenant's job only with its turn)
// is dropped when the turn comes instead of being delivered, counted as
// cancelled, and finished (backlog lowered); its state stays cancelled.
func TestDrainerDropsJobCancelledAfterClaim(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "late")
	s := newSink(t, nil)
	produce(t, rdb, queue.Envelope{ID: "first", Tenant: tenant, Type: "t"}, queue.Envelope{ID: "second", Tenant: tenant, Type: "t"})
	reg := prometheus.NewRegistry()
	// 1 job/s, capacity 1: "second" waits about a second for its turn,
	// still queued.
	run(t, drainer.Config{Redis: rdb, Settings: settings(), Registerer: reg,
		Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Rate: 1})}})
	testenv.WaitFor(t, 3*time.Second, "first delivered and second waiting for its turn", func() bool {
		return s.count(tenant) == 1 && rdb.LLen(ctx, keys.Queue(tenant)).Val() == 1
	})
	if err := jobstate.Cancel(ctx, rdb, tenant, "second"); err != nil {
		t.Fatalf("Cancel(second, claimed, waiting for its turn) = %v, want nil", err)
	}
	testenv.WaitFor(t, 3*time.Second, "backlog 0", func() bool { n, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int(); return n == 0 })
	if n := s.count(tenant); n != 1 {
		t.Errorf("deliveries = %d, want 1 (the cancelled job must not be sent)", n)
	}
	if n := testenv.MetricValue(t, reg, "sluice_dropped_total", map[string]string{"tenant": tenant, "reason": "cancelled"}); n != 1 {
		t.Errorf("sluice_dropped_total{reason=cancelled} = %v, want 1", n)
	}
	for id, want := range map[string]string{"first": "done", "second": "cancelled"} {
		r, err := jobstate.Get(ctx, rdb, tenant, id)
		if err != nil || r.State != want {
			t.Errorf("state of %s = %q (%v), want %s", id, r.State, err, want)
		}
	}
}

// TestDrainerRecordsOutflowAndInFlight: while a delivery runs, the
// tenant's leases hold it (on the Redis backend a delivery its take started
// is counted by its lease, keys.Processing, and not in keys.Delivering:
// Claimed.InLease); the outflow per second counts
// every dispatched unit within about a second (the drainer flushes its
// counts once a second).
func TestDrainerRecordsOutflowAndInFlight(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "flow")
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	h := drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	produce(t, rdb, queue.Envelope{ID: "a", Tenant: tenant, Type: "t", Cost: 3}, queue.Envelope{ID: "b", Tenant: tenant, Type: "t", Cost: 2})
	run(t, drainer.Config{Redis: rdb, Settings: settings(), Handler: h, Tenants: map[string]config.Tenant{tenant: {}}})
	<-started
	<-started
	now := time.Now().UnixMilli()
	if n := rdb.ZCount(ctx, keys.Processing(tenant), strconv.FormatInt(now, 10), "+inf").Val(); n != 2 {
		t.Errorf("deliveries in progress (leases) = %d, want 2", n)
	}
	if n := rdb.ZCard(ctx, keys.Delivering(tenant)).Val(); n != 0 {
		t.Errorf("keys.Delivering holds %d deliveries the take started, want 0", n)
	}
	close(release)
	testenv.WaitFor(t, 3*time.Second, "both done", func() bool { return rdb.ZCard(ctx, keys.Processing(tenant)).Val() == 0 })
	units := func() int64 {
		var sum int64
		for _, v := range rdb.HGetAll(ctx, keys.Outflow(tenant)).Val() {
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += n
		}
		return sum
	}
	testenv.WaitFor(t, 2*time.Second, "the outflow flushed", func() bool { return units() >= 5 })
	if n := units(); n != 5 {
		t.Errorf("outflow units recorded = %d, want 5 (costs 3 + 2)", n)
	}
}
