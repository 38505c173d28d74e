package kafkaq_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// takeN takes n jobs of tenant with Take (up to k per call), waiting up
// to timeout for them.
func takeN(t testing.TB, c *kafkaq.Consumer, tenant string, n, k int, timeout time.Duration) []*queue.Claimed {
	t.Helper()
	var out []*queue.Claimed
	for end := time.Now().Add(timeout); len(out) < n; {
		if time.Now().After(end) {
			t.Fatalf("took %d jobs of %s in %v, want %d", len(out), tenant, timeout, n)
		}
		jobs, wait, err := c.Take(context.Background(), tenant, k)
		if err != nil || wait != 0 {
			t.Fatalf("take %s: wait %v, %v; want 0, nil", tenant, wait, err)
		}
		out = append(out, jobs...)
	}
	if len(out) != n {
		t.Fatalf("took %d jobs of %s, want %d", len(out), tenant, n)
	}
	return out
}

func byID(jobs []*queue.Claimed) map[string]*queue.Claimed {
	m := map[string]*queue.Claimed{}
	for _, j := range jobs {
		m[j.Envelope.ID] = j
	}
	return m
}

// TestKafkaTakeStartsPlainJobs: Take hands out a tenant's jobs several per
// call and records each one's delivery start as jobstate.Dispatch does
// (state in_flight, attempt 1, the in_flight index, the deliveries in
// progress until now + Lease, the dispatched sequence); a released job
// taken again starts as attempt 2; the finishes record done, lower the
// backlog and empty the deliveries.
func TestKafkaTakeStartsPlainJobs(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 2)
	ctx := context.Background()
	tenant := testenv.Name(t, "ktake")
	e.enqueue(tenant, 0, 4)
	cfg := e.consumerConfig()
	cfg.Lease = 7 * time.Second
	c, _ := e.consumer(cfg, nil)
	before := time.Now()
	jobs := takeN(t, c, tenant, 4, 3, 20*time.Second)
	for _, j := range jobs {
		r, err := jobstate.Get(ctx, e.rdb, tenant, j.Envelope.ID)
		if err != nil || j.Started != 1 || r.State != jobstate.InFlight || r.Attempt != 1 {
			t.Errorf("%s: started %d, recorded %s attempt %d (%v); want 1, in_flight 1", j.Envelope.ID, j.Started, r.State, r.Attempt, err)
		}
		if j.Cancelled || j.Duplicate || !j.Now.IsZero() {
			t.Errorf("%s: cancelled %v duplicate %v now %v, want none", j.Envelope.ID, j.Cancelled, j.Duplicate, j.Now)
		}
		score, err := e.rdb.ZScore(ctx, keys.Delivering(tenant), j.Token()).Result()
		if lease := time.UnixMilli(int64(score)).Sub(before); err != nil || lease < 6*time.Second || lease > 9*time.Second {
			t.Errorf("%s: delivery deadline in %v (%v), want about the lease, 7s", j.Envelope.ID, lease, err)
		}
	}
	if n := e.rdb.ZCard(ctx, keys.JobIndex(tenant, jobstate.InFlight)).Val(); n != 4 {
		t.Errorf("in_flight index %d, want 4", n)
	}
	if n := e.rdb.ZCard(ctx, keys.JobIndex(tenant, jobstate.Queued)).Val(); n != 0 {
		t.Errorf("queued index %d, want 0", n)
	}
	if s := e.rdb.Get(ctx, keys.JobsDispatched(tenant)).Val(); s != "4" {
		t.Errorf("dispatched sequence %q, want 4", s)
	}
	if err := c.Release(ctx, jobs[0]); err != nil {
		t.Fatal(err)
	}
	again := takeN(t, c, tenant, 1, 4, 10*time.Second)[0]
	if again.Envelope.ID != jobs[0].Envelope.ID || again.Started != 2 {
		t.Errorf("taken again: %s started %d, want %s started 2", again.Envelope.ID, again.Started, jobs[0].Envelope.ID)
	}
	jobs[0] = again
	for _, j := range jobs {
		finish(t, c, j, nil)
	}
	for _, j := range jobs {
		if r, _ := jobstate.Get(ctx, e.rdb, tenant, j.Envelope.ID); r.State != jobstate.Done {
			t.Errorf("%s after finish: %s, want done", j.Envelope.ID, r.State)
		}
	}
	if n := e.rdb.ZCard(ctx, keys.Delivering(tenant)).Val(); n != 1 {
		t.Errorf("deliveries in progress %d, want 1 (the released start, until its lease)", n)
	}
	if s := e.rdb.Get(ctx, keys.Backlog(tenant)).Val(); s != "0" {
		t.Errorf("backlog %q, want 0", s)
	}
}

// TestKafkaTakeLeavesChecksToTheDrainer: a job the drainer must look at
// before it starts is handed out unstarted (Started 0, its state untouched)
// with Claim's flags: cancelled, a copy of a job done already, one with a
// deadline, a heartbeat job (with its beat and Redis' time), a second copy
// held now; the plain job among them is started.
func TestKafkaTakeLeavesChecksToTheDrainer(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	ctx := context.Background()
	tenant := testenv.Name(t, "ktakechk")
	enq := time.Now().UTC().Truncate(time.Millisecond)
	soon := enq.Add(time.Hour)
	mk := func(id string) queue.Envelope {
		return queue.Envelope{ID: id, Tenant: tenant, Type: "t", Cost: 1, Payload: []byte(`{}`), EnqueuedAt: enq}
	}
	dl, beat, twin := mk("deadline"), mk("beat"), mk("twin")
	dl.Deadline, beat.HeartbeatMS = &soon, 60000
	envs := []queue.Envelope{mk("cancelled"), mk("done"), dl, beat, twin, twin, mk("plain")}
	if err := e.produce.Enqueue(ctx, envs); err != nil {
		t.Fatal(err)
	}
	if err := jobstate.Cancel(ctx, e.rdb, tenant, "cancelled"); err != nil {
		t.Fatal(err)
	}
	e.rdb.HSet(ctx, keys.JobState(tenant, "done"), "state", jobstate.Done)
	c, _ := e.consumer(e.consumerConfig(), nil)
	jobs := takeN(t, c, tenant, len(envs), 16, 20*time.Second)
	var twins []*queue.Claimed
	for _, j := range jobs {
		if j.Envelope.ID == "twin" {
			twins = append(twins, j)
		}
	}
	got := byID(jobs)
	want := map[string]int{"cancelled": 0, "done": 0, "deadline": 0, "beat": 0, "plain": 1}
	for id, n := range want {
		if got[id].Started != n {
			t.Errorf("%s started %d, want %d", id, got[id].Started, n)
		}
	}
	if !got["cancelled"].Cancelled || !got["done"].Duplicate || got["plain"].Cancelled || got["plain"].Duplicate {
		t.Errorf("flags: cancelled %v, done copy %v, plain %v/%v", got["cancelled"].Cancelled, got["done"].Duplicate, got["plain"].Cancelled, got["plain"].Duplicate)
	}
	if b := got["beat"]; b.BeatAt.UnixMilli() != enq.UnixMilli() || b.Now.IsZero() || b.HeartbeatLapsed() {
		t.Errorf("heartbeat job: beat %v now %v lapsed %v, want its enqueued_at, Redis time, not lapsed", b.BeatAt, b.Now, b.HeartbeatLapsed())
	}
	if len(twins) != 2 || twins[0].Duplicate || twins[0].Started != 1 || !twins[1].Duplicate || twins[1].Started != 0 {
		t.Errorf("two copies held at once: %d, want the first started 1, the second a duplicate unstarted", len(twins))
	}
	for _, id := range []string{"deadline", "beat"} {
		if r, _ := jobstate.Get(ctx, e.rdb, tenant, id); r.State != jobstate.Queued || r.Attempt != 0 {
			t.Errorf("%s recorded %s attempt %d, want queued 0", id, r.State, r.Attempt)
		}
	}
	if n := e.rdb.ZCard(ctx, keys.Delivering(tenant)).Val(); n != 2 {
		t.Errorf("deliveries in progress %d, want 2 (plain, the first twin)", n)
	}
}

// TestKafkaTakeRedisDown: with Redis unreachable Take hands every job out
// unstarted and not cancelled (the drainer records the start itself),
// counting sluice_redis_errors_total{op="take"}; nothing is dropped.
func TestKafkaTakeRedisDown(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	tenant := testenv.Name(t, "ktakedown")
	e.enqueue(tenant, 0, 3)
	if err := jobstate.Cancel(context.Background(), e.rdb, tenant, jobID(tenant, 1)); err != nil {
		t.Fatal(err)
	}
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	cfg := e.consumerConfig()
	cfg.Redis = down
	reg := prometheus.NewRegistry()
	c, _ := e.consumer(cfg, reg)
	jobs := takeN(t, c, tenant, 3, 8, 20*time.Second)
	for _, j := range jobs {
		if j.Started != 0 || j.Cancelled || j.Duplicate || j.DecodeErr != nil {
			t.Errorf("%s: started %d cancelled %v duplicate %v (%v), want a plain unstarted job", j.Envelope.ID, j.Started, j.Cancelled, j.Duplicate, j.DecodeErr)
		}
	}
	if n := testenv.MetricValue(t, reg, "sluice_redis_errors_total", map[string]string{"op": "take"}); n < 1 {
		t.Errorf(`sluice_redis_errors_total{op="take"} = %v, want >= 1`, n)
	}
}

// TestKafkaDefaultLease: the consumer's default lease is the drainer's.
func TestKafkaDefaultLease(t *testing.T) {
	if kafkaq.DefaultLease != config.DefaultLease {
		t.Errorf("kafkaq.DefaultLease %v, config.DefaultLease %v: want equal", kafkaq.DefaultLease, config.DefaultLease)
	}
}

// TestKafkaWaitJobs: WaitJobs answers false after about ClaimWait for a
// tenant with nothing to hand out, and true, taking nothing, once a job is
// there (the drainer reserves room for a take only then).
func TestKafkaWaitJobs(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	ctx := context.Background()
	tenant := testenv.Name(t, "kwait")
	c, _ := e.consumer(e.consumerConfig(), nil)
	start := time.Now()
	if c.WaitJobs(ctx, testenv.Name(t, "none")) {
		t.Fatal("WaitJobs of a tenant without jobs = true")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("WaitJobs waited %v, want about ClaimWait", d)
	}
	e.enqueue(tenant, 0, 1)
	testenv.WaitFor(t, 20*time.Second, "WaitJobs true once the job is fetched", func() bool { return c.WaitJobs(ctx, tenant) })
	if jobs := takeN(t, c, tenant, 1, 4, 5*time.Second); jobs[0].Started != 1 {
		t.Errorf("the job after WaitJobs: started %d, want 1 (WaitJobs took nothing)", jobs[0].Started)
	}
}

// TestKafkaUntakeUndoesTheStart: a taken job given back unsent (Untake) is
// back at the head of its FIFO, out of the deliveries in progress, and
// recorded queued with its attempt back, so its next take starts it as
// attempt 1 again.
func TestKafkaUntakeUndoesTheStart(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	ctx := context.Background()
	tenant := testenv.Name(t, "kuntake")
	e.enqueue(tenant, 0, 1)
	c, _ := e.consumer(e.consumerConfig(), nil)
	job := takeN(t, c, tenant, 1, 1, 20*time.Second)[0]
	if job.Started != 1 {
		t.Fatalf("take: started %d, want 1", job.Started)
	}
	if err := c.Untake(ctx, job); err != nil {
		t.Fatal(err)
	}
	if r, _ := jobstate.Get(ctx, e.rdb, tenant, job.Envelope.ID); r.State != jobstate.Queued || r.Attempt != 0 {
		t.Errorf("after Untake: %s attempt %d, want queued 0", r.State, r.Attempt)
	}
	if n := e.rdb.ZCard(ctx, keys.Delivering(tenant)).Val(); n != 0 {
		t.Errorf("deliveries in progress %d after Untake, want 0", n)
	}
	again := takeN(t, c, tenant, 1, 1, 5*time.Second)[0]
	if again.Envelope.ID != job.Envelope.ID || again.Started != 1 {
		t.Errorf("taken again: %s started %d, want %s started 1", again.Envelope.ID, again.Started, job.Envelope.ID)
	}
	finish(t, c, again, nil)
}
