package kafkaq_test

import (
	"context"
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
)

// TestFinishHeldWhileRedisDown: jobs finished while Redis is down (one
// delivered, one dead) get their Redis writes once Redis is back: the final
// states and the dead job's DLQ listing, with the offsets committed only
// then. Before, the writes were dropped: the delivered job read queued for
// good, its cost stayed in the backlog, and the dead job was listed nowhere
// but the DLQ topic.
func TestFinishHeldWhileRedisDown(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	tenant := testenv.Name(t, "held")
	e.enqueue(tenant, 0, 3)
	proc := testenv.StartRedis(t, "--appendonly", "yes")
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	cfg := e.consumerConfig()
	cfg.Redis = rdb
	reg := prometheus.NewRegistry()
	c, stop := e.consumer(cfg, reg)
	jobs := claimN(t, c, tenant, 3, 20*time.Second)
	finish(t, c, jobs[0], nil) // Redis up
	proc.Stop()
	start := time.Now()
	finish(t, c, jobs[1], nil)
	finish(t, c, jobs[2], &queue.DeadLetter{Reason: "rejected", Attempts: 1, At: time.Now()})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the finishes with Redis down took %v, want them to return at once (the writes held)", d)
	}
	if n := testenv.MetricValue(t, reg, "sluice_kafka_finishes_unwritten", nil); n != 2 {
		t.Errorf("sluice_kafka_finishes_unwritten = %v with Redis down, want 2", n)
	}
	time.Sleep(time.Second)
	if got := e.committed(1)[0]; got > 1 {
		t.Errorf("committed offset %d while the finishes' writes wait, want at most 1", got)
	}
	proc.Start()
	ctx := context.Background()
	testenv.WaitFor(t, 10*time.Second, "the held writes land", func() bool {
		a, _ := jobstate.Get(ctx, rdb, tenant, jobs[1].Envelope.ID)
		b, _ := jobstate.Get(ctx, rdb, tenant, jobs[2].Envelope.ID)
		return a.State == jobstate.Done && b.State == jobstate.Dead
	})
	if rdb.HExists(ctx, keys.DeadRecords(tenant), jobs[2].Envelope.ID).Val() != true {
		t.Error("the job dead while Redis was down is not listed in the DLQ")
	}
	testenv.WaitFor(t, 10*time.Second, "the offsets committed", func() bool { return e.committed(1)[0] == 3 })
	if n := testenv.MetricValue(t, reg, "sluice_kafka_finishes_unwritten", nil); n != 0 {
		t.Errorf("sluice_kafka_finishes_unwritten = %v after Redis came back, want 0", n)
	}
	stop()
}

// TestNoDeliveryWhileStartsFail: on Kafka an unlimited tenant's jobs are
// taken from memory, and each start is recorded in Redis (a cancel or a copy
// done elsewhere is checked there). With Redis down the drainer delivers
// nothing: each job waits and goes back to its queue, and once Redis is
// back every job is delivered once, as attempt 1. Before, a failed start
// record delivered the job anyway (a cancelled job too, with a repeated
// Sluice-Attempt).
func TestNoDeliveryWhileStartsFail(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	tenant := testenv.Name(t, "nostart")
	proc := testenv.StartRedis(t, "--appendonly", "yes")
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	cfg := e.consumerConfig()
	cfg.Redis = rdb
	c, stopConsumer := e.consumer(cfg, nil)
	got := newDeliveries()
	var mu sync.Mutex
	attempts := map[string][]int{}
	stop := runDrainer(t, c, rdb, map[string]config.Tenant{tenant: {}}, drainer.HandlerFunc(func(_ context.Context, env queue.Envelope) error {
		got.add(env.ID)
		mu.Lock()
		attempts[env.ID] = append(attempts[env.ID], env.Attempt+1)
		mu.Unlock()
		return nil
	}))
	e.enqueue(tenant, 0, 1)
	testenv.WaitFor(t, 20*time.Second, "the first job delivered", func() bool { n, _ := got.counts(); return n == 1 })
	proc.Stop()
	e.enqueue(tenant, 1, 6)
	time.Sleep(2500 * time.Millisecond)
	if n, total := got.counts(); total != 1 {
		t.Errorf("%d deliveries (%d jobs) while Redis was down, want none after the first", total, n)
	}
	proc.Start()
	testenv.WaitFor(t, 20*time.Second, "every job delivered", func() bool { n, _ := got.counts(); return n == 6 })
	time.Sleep(500 * time.Millisecond)
	stop()
	stopConsumer()
	mu.Lock()
	defer mu.Unlock()
	for id, a := range attempts {
		if len(a) != 1 || a[0] != 1 {
			t.Errorf("%s delivered as attempts %v, want once, as attempt 1", id, a)
		}
	}
}

// TestFinishWithoutReplySentAgain: a finish whose call got no reply is held
// and sent again, and lowers the backlog once whether its first send ran or
// not. Job 1's first send waits in a paused Redis, which runs it when it
// resumes; job 2's waits in a paused Redis that is then killed, so it never
// runs. Both end done, with the backlog lowered by exactly their costs, and
// the offsets committed only then. Before, a finish that timed out was not
// held: job 2 stayed unrecorded with its cost in the backlog.
func TestFinishWithoutReplySentAgain(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	tenant := testenv.Name(t, "noreply")
	e.enqueue(tenant, 0, 3)
	proc := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	rdb.Set(ctx, keys.Backlog(tenant), 10, time.Hour)
	cfg := e.consumerConfig()
	cfg.Redis = rdb
	reg := prometheus.NewRegistry()
	c, stop := e.consumer(cfg, reg)
	defer stop()
	jobs := claimN(t, c, tenant, 3, 20*time.Second)
	finish(t, c, jobs[0], nil)
	unwritten := func() float64 { return testenv.MetricValue(t, reg, "sluice_kafka_finishes_unwritten", nil) }

	proc.Pause()
	finish(t, c, jobs[1], nil) // times out: its call waits in Redis
	if n := unwritten(); n != 1 {
		t.Errorf("sluice_kafka_finishes_unwritten = %v after a finish timed out, want 1", n)
	}
	time.Sleep(1200 * time.Millisecond) // a send again, which times out too
	proc.Resume()
	testenv.WaitFor(t, 10*time.Second, "job 1's finish settled", func() bool { return unwritten() == 0 })
	if got, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int64(); got != 8 {
		t.Errorf("backlog %d after two finishes, one sent more than once, want 8", got)
	}

	proc.Pause()
	finish(t, c, jobs[2], nil) // times out, and never runs
	proc.Kill()
	proc.Start()
	testenv.WaitFor(t, 10*time.Second, "job 2's finish written", func() bool {
		r, _ := jobstate.Get(ctx, rdb, tenant, jobs[2].Envelope.ID)
		return r.State == jobstate.Done && unwritten() == 0
	})
	if got, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int64(); got != 7 {
		t.Errorf("backlog %d after three finishes, want 7", got)
	}
	for _, j := range jobs[:2] {
		if r, _ := jobstate.Get(ctx, rdb, tenant, j.Envelope.ID); r.State != jobstate.Done {
			t.Errorf("%s reads %q, want done", j.Envelope.ID, r.State)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the offsets committed", func() bool { return e.committed(1)[0] == 3 })
}
