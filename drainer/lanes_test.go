package drainer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// start runs a drainer like run does and returns it, so a test can call
// SetTenants on it.
func start(t *testing.T, cfg drainer.Config) *drainer.Drainer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d, err := drainer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("drainer Run: %v", err)
		}
	})
	return d
}

// TestDrainerLaneFollowsAFixedOutflowWhileRetrying gives a tenant an
// outflow capacity the bucket script refuses (9007199255: every Take is an
// error), so its lane holds the job and backs off; SetTenants with a
// capacity the script takes must reach that retrying job without a
// restart: it is delivered within 3 s of the fix (the old code kept asking
// with the refused capacity and delivered nothing).
func TestDrainerLaneFollowsAFixedOutflowWhileRetrying(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	tenant := testenv.Name(t, "fix")
	s := newSink(t, nil)
	push(t, rdb, queue.Envelope{ID: "ok", Tenant: tenant, Type: "t"})
	reg := prometheus.NewRegistry()
	st := settings()
	cons := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: st.Lease, Poll: 100 * time.Millisecond}))
	d := start(t, drainer.Config{Redis: rdb, Consumer: cons, Settings: st, Registerer: reg,
		Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Rate: 10, Capacity: 9007199255})}})
	outflowErrs := func() float64 {
		return testenv.MetricValue(t, reg, "sluice_drainer_errors_total", map[string]string{"op": "outflow"})
	}
	testenv.WaitFor(t, 5*time.Second, "two outflow errors", func() bool { return outflowErrs() >= 2 })
	if n := s.count(tenant); n != 0 {
		t.Fatalf("%d deliveries while the bucket refuses the capacity, want 0", n)
	}
	d.SetTenants(map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Rate: 10, Capacity: 5})})
	fixed := time.Now()
	testenv.WaitFor(t, 3*time.Second, "the job delivered after the capacity is fixed", func() bool { return s.count(tenant) == 1 })
	t.Logf("delivered %v after the fix", time.Since(fixed).Round(time.Millisecond))
}

// TestDrainerWaitingJobSeesANewRate: at 0.1 jobs/s and capacity 1 the
// second job waits 10 s for the bucket; raising the rate with SetTenants
// while it waits lets it go within 2 s.
func TestDrainerWaitingJobSeesANewRate(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	tenant := testenv.Name(t, "rate")
	s := newSink(t, nil)
	push(t, rdb, jobs(tenant, 2)...)
	st := settings()
	cons := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: st.Lease, Poll: 100 * time.Millisecond}))
	d := start(t, drainer.Config{Redis: rdb, Consumer: cons, Settings: st,
		Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Rate: 0.1, Capacity: 1})}})
	testenv.WaitFor(t, 3*time.Second, "the first job delivered", func() bool { return s.count(tenant) == 1 })
	time.Sleep(300 * time.Millisecond) // the second job is waiting for the bucket
	if n := s.count(tenant); n != 1 {
		t.Fatalf("%d deliveries before the rate is raised, want 1", n)
	}
	d.SetTenants(map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Rate: 100, Capacity: 1})})
	testenv.WaitFor(t, 2*time.Second, "the waiting job delivered at the new rate", func() bool { return s.count(tenant) == 2 })
}

// Idle lanes on the Redis backend (Poll 100 ms, Lease 3 s): each lane
// polls with one loop only, backing off to one claim a second
// (idlePollMax) after about 1.5 s of quiet; the reaper runs one script per
// tenant every Lease/4 = 750 ms. Over idleWindow that is, per tenant,
// about 3 claims + 4 reaps; idleCallsPerTenantMax allows for the timers'
// phase. Before the fix an idle unlimited lane made ~40 claims a second
// and a shaped one ~10.
const (
	idleTenants           = 10
	idleWindow            = 3 * time.Second
	idleCallsPerTenantMax = 10
)

// TestDrainerIdleLanesPollSparingly runs 5 unlimited and 5 shaped idle
// tenants on a private Redis: after a settling period the drainer's script
// calls over idleWindow stay ≤ idleTenants × idleCallsPerTenantMax, and a
// job then pushed to each kind of tenant is delivered within 2 s.
func TestDrainerIdleLanesPollSparingly(t *testing.T) {
	t.Parallel() // private Redis; load only lowers the counts
	rdb := privateRedis(t)
	s := newSink(t, nil)
	st := settings()
	cons := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: st.Lease, Poll: 100 * time.Millisecond}))
	tenants := map[string]config.Tenant{}
	var unlimited, shaped string
	for i := range idleTenants {
		o := config.Outflow{}
		if i%2 == 1 {
			o = config.Outflow{Rate: 10, Capacity: 5}
		}
		name := testenv.Name(t, fmt.Sprintf("idle%d", i))
		tenants[name] = tenantCfg(s.srv.URL, o)
		if i%2 == 0 {
			unlimited = name
		} else {
			shaped = name
		}
	}
	start(t, drainer.Config{Redis: rdb, Consumer: cons, Settings: st, Tenants: tenants})
	time.Sleep(2500 * time.Millisecond) // lanes start and back off
	before := scriptCalls(t, rdb)
	time.Sleep(idleWindow)
	n := scriptCalls(t, rdb) - before
	t.Logf("%d idle tenants: %d script calls in %v (%.1f/s per tenant)", idleTenants, n, idleWindow, float64(n)/idleWindow.Seconds()/idleTenants)
	if limit := int64(idleTenants * idleCallsPerTenantMax); n > limit {
		t.Errorf("%d idle tenants made %d script calls in %v, want ≤ %d", idleTenants, n, idleWindow, limit)
	}
	// The lanes started together, so their 1 s polls share a phase that
	// the windows above are whole seconds of; push half a poll off it, so
	// the latency logged is the typical one, not a lucky one.
	time.Sleep(500 * time.Millisecond)
	pushed := time.Now()
	push(t, rdb, queue.Envelope{ID: "u", Tenant: unlimited, Type: "t"}, queue.Envelope{ID: "s", Tenant: shaped, Type: "t"})
	testenv.WaitFor(t, 2*time.Second, "a job delivered to each idle tenant", func() bool {
		return s.count(unlimited) == 1 && s.count(shaped) == 1
	})
	t.Logf("first jobs after idle delivered within %v", time.Since(pushed).Round(time.Millisecond))
}

// TestDrainerIdleUnlimitedLaneStillDrainsABurst: after the lane went idle
// (its extra loops parked), a burst of jobs is delivered in full.
func TestDrainerIdleUnlimitedLaneStillDrainsABurst(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	tenant := testenv.Name(t, "burst")
	s := newSink(t, nil)
	st := settings()
	cons := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: st.Lease, Poll: 100 * time.Millisecond}))
	start(t, drainer.Config{Redis: rdb, Consumer: cons, Settings: st,
		Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{})}})
	time.Sleep(2 * time.Second)
	push(t, rdb, jobs(tenant, 200)...)
	testenv.WaitFor(t, 5*time.Second, "200 jobs delivered", func() bool { return s.count(tenant) == 200 })
}
