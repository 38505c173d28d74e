package drainer_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// This file pins that an idle tenant keeps no lane under a queue.Prober
// consumer (both backends): its lane ends a few seconds after its queue
// empties, and the probe (at most a second apart), a scheduled job falling
// due, a retry falling due or an expired lease starts it again.

// lanes is the drainer's sluice_drainer_lanes gauge.
func lanes(t *testing.T, reg prometheus.Gatherer) float64 {
	return testenv.MetricValue(t, reg, "sluice_drainer_lanes", nil)
}

// TestDrainerIdleLaneEndsAndComesBack (both backends, a shaped and an
// unlimited tenant): jobs are delivered, the lane ends within laneIdleExit
// (3 s) + 3 s of the last one, and new jobs, a scheduled job due in 2 s
// and a retry due in 4 s each start it again and are delivered.
func TestDrainerIdleLaneEndsAndComesBack(t *testing.T) {
	t.Parallel()
	for _, name := range backends {
		for _, o := range []config.Outflow{{}, {Rate: 50, Capacity: 5}} {
			t.Run(fmt.Sprintf("%s/rate%g", name, o.Rate), func(t *testing.T) {
				t.Parallel()
				s := newStack(t, name, testenv.Name(t, "idle"), o)
				var retried atomic.Bool
				s.hold = func(_ context.Context, job queue.Envelope) error {
					if job.ID == "retry" && !retried.Swap(true) {
						return drainer.RetryAfter(4 * time.Second)
					}
					return nil
				}
				reg := prometheus.NewRegistry()
				s.start(reg)
				round := func(what string, ids ...string) {
					t.Helper()
					for _, id := range ids {
						s.enqueue(queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: s.tenant, Type: "mail", Cost: 1, Payload: []byte(`{}`)})
					}
					testenv.WaitFor(t, 5*time.Second, what+" delivered", func() bool {
						for _, id := range ids {
							if s.deliveredAt(id).IsZero() {
								return false
							}
						}
						return true
					})
					testenv.WaitFor(t, 8*time.Second, "the idle lane ended after "+what, func() bool { return lanes(t, reg) == 0 })
				}
				round("the first jobs", "a", "b", "c")
				round("a job after the lane ended", "d")

				due := time.Now().Add(2 * time.Second)
				s.schedule("sched", due)
				testenv.WaitFor(t, 5*time.Second, "the scheduled job delivered", func() bool { return !s.deliveredAt("sched").IsZero() })
				if late := s.deliveredAt("sched").Sub(due); late > 1500*time.Millisecond {
					t.Errorf("scheduled job delivered %v after its due time, want ≤ 1.5s (the lane had ended)", late)
				}
				testenv.WaitFor(t, 8*time.Second, "the idle lane ended after the scheduled job", func() bool { return lanes(t, reg) == 0 })

				s.enqueue(queue.Envelope{Version: queue.EnvelopeVersion, ID: "retry", Tenant: s.tenant, Type: "mail", Cost: 1, Payload: []byte(`{}`)})
				testenv.WaitFor(t, 5*time.Second, "the retried job's first attempt", func() bool { return !s.deliveredAt("retry").IsZero() })
				first := s.deliveredAt("retry")
				testenv.WaitFor(t, 10*time.Second, "the retried job's second attempt", func() bool { return s.attempts("retry") == 2 })
				if gap := s.lastAttemptAt("retry").Sub(first); gap < 4*time.Second || gap > 6*time.Second {
					t.Errorf("retry after %v, want 4s..6s (Retry-After 4s, the lane ended meanwhile)", gap)
				}
			})
		}
	}
}

// TestDrainerIdleTenantsKeepNoLanes runs 200 configured idle tenants (half
// shaped) on a private Redis: no lane runs, and over 3 s they cost no script
// call and at most 2 read commands per tenant per second (the probe's one
// MGET of every backlog counter each second with a 4 s lease, its three
// queue reads of a fifth of the tenants each second, the depth sampler's
// EXISTS every 2 s: at most about 1.6 a second in a 3 s window); a job then
// pushed to one of them (with its counter) is delivered within 2.5 s.
func TestDrainerIdleTenantsKeepNoLanes(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	s := newSink(t, nil)
	st := settings()
	st.Lease = 4 * time.Second // the probe every Lease/4 = 1 s
	cons := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: st.Lease}))
	const n = 200
	tenants := map[string]config.Tenant{}
	var one string
	for i := range n {
		o := config.Outflow{}
		if i%2 == 1 {
			o = config.Outflow{Rate: 10, Capacity: 5}
		}
		one = testenv.Name(t, fmt.Sprintf("t%d", i))
		tenants[one] = tenantCfg(s.srv.URL, o)
	}
	reg := prometheus.NewRegistry()
	start(t, drainer.Config{Redis: rdb, Consumer: cons, Settings: st, Tenants: tenants, Registerer: reg})
	time.Sleep(1500 * time.Millisecond)
	if l := lanes(t, reg); l != 0 {
		t.Errorf("%d idle tenants: %v lanes, want 0", n, l)
	}
	const window = 3 * time.Second
	readCmds := []string{"get", "mget", "exists", "llen", "zrange"}
	scripts, reads := scriptCalls(t, rdb), testenv.CommandCalls(t, rdb, readCmds...)
	time.Sleep(window)
	scripts, reads = scriptCalls(t, rdb)-scripts, testenv.CommandCalls(t, rdb, readCmds...)-reads
	per := func(c int64) float64 { return float64(c) / n / window.Seconds() }
	t.Logf("%d idle tenants: %.2f script calls and %.2f reads per tenant per second", n, per(scripts), per(reads))
	if per(scripts) > 0.05 || per(reads) > 2 {
		t.Errorf("idle tenants cost %.2f script calls and %.2f reads per tenant per second, want ≤ 0.05 and ≤ 2", per(scripts), per(reads))
	}
	push(t, rdb, queue.Envelope{ID: "j", Tenant: one, Type: "t"})
	testenv.WaitFor(t, 2500*time.Millisecond, "a job pushed to an idle tenant delivered", func() bool { return s.count(one) == 1 })
}

// TestDrainerProbeReapsAnIdleTenantsLease: a job leased by a consumer that
// then vanished (a dead drainer) is returned by the probe's reap and
// delivered, though its tenant had no lane here.
func TestDrainerProbeReapsAnIdleTenantsLease(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	s := newSink(t, nil)
	tenant := testenv.Name(t, "orphan")
	push(t, rdb, queue.Envelope{ID: "o", Tenant: tenant, Type: "t"})
	dead := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: 500 * time.Millisecond}))
	if job, _, err := dead.Claim(context.Background(), tenant); err != nil || job == nil {
		t.Fatalf("claim by the vanishing consumer: %v, %v", job, err)
	}
	st := settings()
	cons := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: st.Lease}))
	reg := prometheus.NewRegistry()
	start(t, drainer.Config{Redis: rdb, Consumer: cons, Settings: st, Registerer: reg,
		Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{})}})
	testenv.WaitFor(t, 4*time.Second, "the orphaned job delivered", func() bool { return s.count(tenant) == 1 })
	if r := testenv.MetricValue(t, reg, "sluice_reaped_total", nil); r != 1 {
		t.Errorf("sluice_reaped_total %v, want 1", r)
	}
}

// attempts is how many times job id was delivered.
func (s *stack) attempts(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.seen {
		if d.id == id {
			n++
		}
	}
	return n
}

// lastAttemptAt is when job id was last delivered (zero: never).
func (s *stack) lastAttemptAt(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var at time.Time
	for _, d := range s.seen {
		if d.id == id {
			at = d.at
		}
	}
	return at
}
