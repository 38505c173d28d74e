package drainer_test

import (
	"context"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// privateRedis is a redis-server of the test's own, so INFO commandstats
// counts this test's drainer alone.
func privateRedis(t *testing.T) *redis.Client {
	t.Helper()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// pushRaw writes envelopes onto the tenant's Redis list as an older ingest
// (one that let any cost in) would have, without the backlog counter.
func pushRaw(t *testing.T, rdb redis.UniversalClient, jobs ...queue.Envelope) {
	t.Helper()
	for _, e := range jobs {
		e.Version = queue.EnvelopeVersion
		b, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.RPush(context.Background(), keys.Queue(e.Tenant), b).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// scriptCalls counts EVALSHA and EVAL on a private server.
func scriptCalls(t *testing.T, rdb *redis.Client) int64 {
	return testenv.CommandCalls(t, rdb, "evalsha", "eval")
}

// TestDrainerDeadLettersJobsLargerThanTheBucket (Redis backend; the Kafka
// backend's twin is queue's TestKafkaDrainerDeadLettersJobsLargerThanTheBucket):
// jobs of cost 2^63−1 and of capacity + 1 put on the queue directly, ahead
// of a normal job, reach the DLQ with reason cost_exceeds_capacity, the
// normal job is delivered, the water key keeps a TTL, and the idle drainer
// then makes at most idleScriptCallsMax script calls in 2 s.
func TestDrainerDeadLettersJobsLargerThanTheBucket(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "big")
	s := newSink(t, nil)
	pushRaw(t, rdb,
		queue.Envelope{ID: "max", Tenant: tenant, Type: "t", Cost: math.MaxInt64},
		queue.Envelope{ID: "six", Tenant: tenant, Type: "t", Cost: 6},
		queue.Envelope{ID: "ok", Tenant: tenant, Type: "t", Cost: 1},
	)
	rdb.IncrBy(ctx, keys.Backlog(tenant), 7) // the two costs that fit an int64 sum
	reg := prometheus.NewRegistry()
	st := settings()
	cons := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: st.Lease, Poll: 100 * time.Millisecond}))
	run(t, drainer.Config{Redis: rdb, Consumer: cons, Settings: st, Registerer: reg,
		Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Rate: 10, Capacity: 5})}})

	testenv.WaitFor(t, 5*time.Second, "the normal job delivered", func() bool { return s.count(tenant) == 1 })
	testenv.WaitFor(t, 5*time.Second, "two dead letters", func() bool { return rdb.ZCard(ctx, keys.JobIndex(tenant, "dead")).Val() == 2 })
	if d := s.deliveries(); d[0].id != "ok" {
		t.Errorf("delivered %s, want ok", d[0].id)
	}
	var got []string
	recs, err := dlq.Letters(ctx, rdb, tenant)
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range recs {
		env, err := queue.Decode(dl.Job)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, env.ID+" "+dl.Reason)
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{"max cost_exceeds_capacity", "six cost_exceeds_capacity"}, got); diff != "" {
		t.Errorf("dead letters (-want +got):\n%s", diff)
	}
	if n := testenv.MetricValue(t, reg, "sluice_dlq_total", map[string]string{"tenant": tenant, "reason": drainer.ReasonCostExceedsCapacity}); n != 2 {
		t.Errorf("sluice_dlq_total{reason=cost_exceeds_capacity} = %v, want 2", n)
	}
	testenv.WaitFor(t, 2*time.Second, "backlog 0", func() bool { return rdb.Get(ctx, keys.Backlog(tenant)).Val() == "0" })
	// Their finishes went through whole (a cost the finish script refused
	// or could not sum would leave them in the in_flight index and fail
	// every delivery of them).
	testenv.WaitFor(t, 2*time.Second, "the in_flight index empty", func() bool {
		return rdb.ZCard(ctx, keys.JobIndex(tenant, "in_flight")).Val() == 0
	})
	if ttl := rdb.PTTL(ctx, keys.Water(tenant)).Val(); ttl <= 0 {
		t.Errorf("water key PTTL = %v, want > 0", ttl)
	}
	if w := rdb.HGet(ctx, keys.Water(tenant), "water").Val(); w != "1000000" {
		t.Errorf("stored water = %q, want 1000000 (the normal job's unit only)", w)
	}
	assertIdleScriptCalls(t, rdb)
}

// idleScriptCallsMax bounds the script calls of an idle drainer with one
// lane over 2 s on the Redis backend: its claims (one per poll, the pause
// doubling from 100 ms to 1 s while idle: at most 20), a reap every 750 ms
// (3), and slack for the timers' phase; runs see about 6. The wedge this
// guards against made 16,600–29,000 calls a second.
const idleScriptCallsMax = 35

func assertIdleScriptCalls(t *testing.T, rdb *redis.Client) {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // settle calls still in flight
	before := scriptCalls(t, rdb)
	time.Sleep(2 * time.Second)
	n := scriptCalls(t, rdb) - before
	t.Logf("idle drainer: %d script calls in 2s", n)
	if n > idleScriptCallsMax {
		t.Errorf("idle drainer made %d script calls in 2s, want ≤ %d", n, idleScriptCallsMax)
	}
}

// TestDrainerLaneBacksOffWhileTheBucketScriptFails stores an override rate
// the bucket script refuses ("inf": every Take answers an error), so the lane holding
// the tenant's job must back off (errorPause doubling to errorPauseMax)
// rather than spin: over 3 s it may make at most 10 outflow calls (the
// pauses, jittered in [p/2, p], sum to ≥ 2.35 s over the first 6), and the
// whole drainer at most 30 script calls (those, a reap every 750 ms, a
// lease extension every second). When the override is removed the job is
// delivered.
func TestDrainerLaneBacksOffWhileTheBucketScriptFails(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "fail")
	s := newSink(t, nil)
	rdb.HSet(ctx, keys.Override(tenant), "outflow_rate", "inf")
	rdb.PExpire(ctx, keys.Override(tenant), time.Minute)
	push(t, rdb, queue.Envelope{ID: "ok", Tenant: tenant, Type: "t"})
	reg := prometheus.NewRegistry()
	st := settings()
	cons := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: st.Lease, Poll: 100 * time.Millisecond}))
	run(t, drainer.Config{Redis: rdb, Consumer: cons, Settings: st, Registerer: reg,
		Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Rate: 10, Capacity: 5})}})
	outflowErrs := func() float64 {
		return testenv.MetricValue(t, reg, "sluice_drainer_errors_total", map[string]string{"op": "outflow"})
	}
	testenv.WaitFor(t, 3*time.Second, "the first outflow error", func() bool { return outflowErrs() >= 1 })
	e0, c0 := outflowErrs(), scriptCalls(t, rdb)
	time.Sleep(3 * time.Second)
	e1, c1 := outflowErrs(), scriptCalls(t, rdb)
	t.Logf("failing bucket: %v outflow errors, %d script calls in 3s", e1-e0, c1-c0)
	if e1-e0 > 10 {
		t.Errorf("%v outflow errors in 3s, want ≤ 10 (a capped exponential backoff)", e1-e0)
	}
	if c1-c0 > 30 {
		t.Errorf("%d script calls in 3s while the bucket fails, want ≤ 30", c1-c0)
	}
	if n := s.count(tenant); n != 0 {
		t.Errorf("%d deliveries while the bucket fails, want 0", n)
	}
	rdb.HDel(ctx, keys.Override(tenant), "outflow_rate")
	testenv.WaitFor(t, 2*errorPauseMax, "the job delivered once the bucket answers", func() bool { return s.count(tenant) == 1 })
}

// errorPauseMax mirrors drainer's cap of a lane's error pause.
const errorPauseMax = 5 * time.Second

// TestDrainerDeadlineReadsItsClock: the deadline drop reads Config.Clock,
// not the wall clock: on a clock two hours ahead a job due in an hour is
// dropped as expired, and on one two hours behind a job an hour past its
// deadline is delivered.
func TestDrainerDeadlineReadsItsClock(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	for _, tc := range []struct {
		name      string
		skew      time.Duration // of the drainer's clock
		deadline  time.Duration // of the job, from the wall clock
		delivered bool
	}{
		{"clock ahead", 2 * time.Hour, time.Hour, false},
		{"clock behind", -2 * time.Hour, -time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tenant := testenv.Name(t, "clk")
			s := newSink(t, nil)
			dl := time.Now().Add(tc.deadline)
			push(t, rdb, queue.Envelope{ID: "j", Tenant: tenant, Deadline: &dl})
			reg := prometheus.NewRegistry()
			run(t, drainer.Config{Redis: rdb, Settings: settings(), Registerer: reg, Clock: testenv.NewClock(time.Now().Add(tc.skew)),
				Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{})}})
			testenv.WaitFor(t, 3*time.Second, "the job settled", func() bool { return rdb.Get(context.Background(), keys.Backlog(tenant)).Val() == "0" })
			expired := testenv.MetricValue(t, reg, "sluice_dropped_total", map[string]string{"tenant": tenant, "reason": "expired"})
			if got := s.count(tenant) == 1; got != tc.delivered || expired != map[bool]float64{true: 0, false: 1}[tc.delivered] {
				t.Errorf("delivered %v, dropped as expired %v; want delivered %v", got, expired, tc.delivered)
			}
		})
	}
}
