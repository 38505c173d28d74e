package kafkaq_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// turnEnv is one tenant's jobs on a one-partition topic and a consumer of
// it holding them all in memory, for TakeTurn.
type turnEnv struct {
	t      *testing.T
	e      *kafkaEnv
	c      *kafkaq.Consumer
	tenant string
}

func newTurnEnv(t *testing.T, envs ...queue.Envelope) *turnEnv {
	t.Helper()
	e := newKafkaEnv(t, 1)
	tenant := testenv.Name(t, "kturn")
	for i := range envs {
		envs[i].Tenant, envs[i].Type, envs[i].Payload = tenant, "t", []byte(`{}`)
		envs[i].Cost = max(envs[i].Cost, 1)
	}
	if err := e.produce.Enqueue(context.Background(), envs); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c, _ := e.consumer(e.consumerConfig(), reg)
	// Every job in memory first, so no fetch comes between two takes.
	testenv.WaitFor(t, 20*time.Second, "the jobs fetched", func() bool {
		return testenv.MetricValue(t, reg, "sluice_lane_jobs", nil) >= float64(len(envs))
	})
	return &turnEnv{t: t, e: e, c: c, tenant: tenant}
}

// take is one TakeTurn of one job (takeK).
func (te *turnEnv) take(rate, capacity float64, ahead time.Duration) ([]*queue.Claimed, queue.Turn) {
	te.t.Helper()
	return te.takeK(1, rate, capacity, ahead)
}

func turnIDs(jobs []*queue.Claimed) []string {
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.Envelope.ID)
	}
	return ids
}

// TestKafkaTakeTurnPassesTheBucket: a shaped tenant's take starts a job
// only with its turn from the shared bucket; with the bucket full it hands
// out nothing, answers the wait the bucket would and keeps the job for the
// next take, in order; an override's rate is used; a job whose cost exceeds
// the capacity comes unstarted, having taken no turn.
func TestKafkaTakeTurnPassesTheBucket(t *testing.T) {
	t.Parallel()
	te := newTurnEnv(t, queue.Envelope{ID: "a"}, queue.Envelope{ID: "b"}, queue.Envelope{ID: "c"},
		queue.Envelope{ID: "big", Cost: 3}, queue.Envelope{ID: "d"})
	ctx := context.Background()
	rdb := te.e.rdb
	// The level leaks 0.5 a second from the first take on.
	first := time.Now()
	leaked := func() float64 { return 0.5*time.Since(first).Seconds() + 0.001 }
	for i, id := range []string{"a", "b"} {
		jobs, turn := te.take(0.5, 2, 0)
		if len(jobs) != 1 || jobs[0].Envelope.ID != id || jobs[0].Started != 1 || turn.Wait != 0 || jobs[0].SendDelay != 0 {
			t.Fatalf("take %s: %v, turn %+v; want %s started at once", id, turnIDs(jobs), turn, id)
		}
		if w := float64(i + 1); turn.Water > w || turn.Water < w-leaked() || turn.Rate != 0.5 {
			t.Errorf("take %s: water %v rate %v, want %v (less what leaked) and 0.5", id, turn.Water, turn.Rate, w)
		}
		if r, _ := jobstate.Get(ctx, rdb, te.tenant, id); r.State != jobstate.InFlight || r.Attempt != 1 {
			t.Errorf("%s recorded %s attempt %d, want in_flight 1", id, r.State, r.Attempt)
		}
	}
	jobs, turn := te.take(0.5, 2, 0)
	if low := 2 - leaked(); len(jobs) != 0 || turn.Wait > 2*time.Second || turn.Wait.Seconds() < 2*(low-1) || turn.Water < low || turn.Rate != 0.5 {
		t.Fatalf("full bucket: %v, turn %+v; want none, a wait of about 1/rate = 2 s and water 2 (less what leaked in %v)", turnIDs(jobs), turn, time.Since(first))
	}
	if r, _ := jobstate.Get(ctx, rdb, te.tenant, "c"); r.State != jobstate.Queued {
		t.Errorf("c after the refused take: %s, want queued", r.State)
	}
	// An override of 1000/s empties the bucket at once; c is still first.
	rdb.HSet(ctx, keys.Override(te.tenant), "outflow_rate", "1000")
	time.Sleep(5 * time.Millisecond)
	if jobs, turn := te.take(0.5, 2, 0); len(jobs) != 1 || jobs[0].Envelope.ID != "c" || jobs[0].Started != 1 || turn.Rate != 1000 {
		t.Fatalf("with the override: %v, turn %+v; want c started at rate 1000", turnIDs(jobs), turn)
	}
	rdb.Del(ctx, keys.Override(te.tenant), keys.Water(te.tenant))

	// Cost 3 can never pass a capacity of 2: unstarted, no turn taken.
	jobs, _ = te.take(0.5, 2, 0)
	if len(jobs) != 1 || jobs[0].Envelope.ID != "big" || jobs[0].Started != 0 {
		t.Fatalf("cost over capacity: %v, want big unstarted", turnIDs(jobs))
	}
	if rdb.Exists(ctx, keys.Water(te.tenant)).Val() != 0 {
		t.Error("the too costly job wrote the water level")
	}
	if r, _ := jobstate.Get(ctx, rdb, te.tenant, "big"); r.State != jobstate.Queued {
		t.Errorf("big recorded %s, want queued (the drainer's path starts it)", r.State)
	}
	if jobs, turn := te.take(0.5, 2, 0); len(jobs) != 1 || jobs[0].Envelope.ID != "d" || jobs[0].Started != 1 || math.Abs(turn.Water-1) > 0.01 {
		t.Errorf("after it: %v, turn %+v; want d started, water 1", turnIDs(jobs), turn)
	}
	if n := rdb.ZCard(ctx, keys.Delivering(te.tenant)).Val(); n != 4 {
		t.Errorf("deliveries in progress %d, want 4 (a, b, c, d)", n)
	}
}

// TestKafkaTakeTurnGrantsAhead: a turn due within ahead is granted now with
// the delay before its send, and its cost is in the bucket at once, so the
// next ask waits for the turn after it.
func TestKafkaTakeTurnGrantsAhead(t *testing.T) {
	t.Parallel()
	te := newTurnEnv(t, queue.Envelope{ID: "a"}, queue.Envelope{ID: "b"}, queue.Envelope{ID: "c"})
	if jobs, turn := te.take(10, 1, 200*time.Millisecond); len(jobs) != 1 || jobs[0].Envelope.ID != "a" || jobs[0].SendDelay != 0 {
		t.Fatalf("first: %v, %+v; want a at once", turnIDs(jobs), turn)
	}
	jobs, turn := te.take(10, 1, 200*time.Millisecond)
	if len(jobs) != 1 || jobs[0].Envelope.ID != "b" || jobs[0].Started != 1 || jobs[0].SendDelay < 80*time.Millisecond || jobs[0].SendDelay > 100*time.Millisecond {
		t.Fatalf("second: %v, %+v; want b granted about 100 ms ahead", turnIDs(jobs), turn)
	}
	if turn.Water < 1.8 {
		t.Errorf("water after the turn granted ahead %v, want about 2 (both costs in)", turn.Water)
	}
	jobs, turn = te.take(10, 1, 0)
	if len(jobs) != 0 || turn.Wait < 160*time.Millisecond || turn.Wait > 200*time.Millisecond {
		t.Fatalf("third without ahead: %v, %+v; want none and a wait of about 200 ms", turnIDs(jobs), turn)
	}
}

// TestKafkaTakeTurnLeavesChecksToTheDrainer: a job Take would not start
// (cancelled, a done copy, with a deadline, a heartbeat job) comes
// unstarted from TakeTurn with Claim's flags and has taken no turn: the
// bucket is not written (for the last two not even read: Go knows them).
func TestKafkaTakeTurnLeavesChecksToTheDrainer(t *testing.T) {
	t.Parallel()
	enq := time.Now().UTC().Truncate(time.Millisecond)
	soon := enq.Add(time.Hour)
	te := newTurnEnv(t, queue.Envelope{ID: "cancelled", EnqueuedAt: enq}, queue.Envelope{ID: "done", EnqueuedAt: enq},
		queue.Envelope{ID: "deadline", Deadline: &soon, EnqueuedAt: enq}, queue.Envelope{ID: "beat", HeartbeatMS: 60000, EnqueuedAt: enq})
	ctx := context.Background()
	if err := jobstate.Cancel(ctx, te.e.rdb, te.tenant, "cancelled"); err != nil {
		t.Fatal(err)
	}
	te.e.rdb.HSet(ctx, keys.JobState(te.tenant, "done"), "state", jobstate.Done)
	for _, id := range []string{"cancelled", "done", "deadline", "beat"} {
		jobs, turn := te.take(1, 1, 0)
		if len(jobs) != 1 || jobs[0].Envelope.ID != id || jobs[0].Started != 0 || turn.Wait != 0 || jobs[0].SendDelay != 0 || turn.Water != 0 {
			t.Fatalf("%s: %v, %+v; want it unstarted with no turn", id, turnIDs(jobs), turn)
		}
		if read := id == "cancelled" || id == "done"; read != (turn.Rate > 0) {
			t.Errorf("%s: bucket read %v (rate %v), want %v", id, turn.Rate > 0, turn.Rate, read)
		}
		j := jobs[0]
		if j.Cancelled != (id == "cancelled") || j.Duplicate != (id == "done") || (id == "beat") == j.Now.IsZero() {
			t.Errorf("%s: cancelled %v duplicate %v now %v", id, j.Cancelled, j.Duplicate, j.Now)
		}
	}
	if te.e.rdb.Exists(ctx, keys.Water(te.tenant)).Val() != 0 {
		t.Error("a job left to the drainer wrote the water level")
	}
}

// TestKafkaTakeTurnRefusesBadNumbers: TakeTurn refuses a rate, capacity or
// ahead out of range before it takes a job (redisq's errors), and a number
// kafka_take.lua cannot represent (an argument or the tenant's override)
// with the script's error, the job kept for the next take.
func TestKafkaTakeTurnRefusesBadNumbers(t *testing.T) {
	t.Parallel()
	te := newTurnEnv(t, queue.Envelope{ID: "a"})
	ctx := context.Background()
	for _, bad := range []struct {
		rate, capacity float64
		ahead          time.Duration
	}{{0, 2, 0}, {1, 0, 0}, {math.NaN(), 2, 0}, {math.Inf(1), 2, 0}, {1, 2, -time.Millisecond}, {1, 2, 2 * time.Second}} {
		if _, _, _, err := te.c.TakeTurn(ctx, te.tenant, 1, bad.rate, bad.capacity, bad.ahead); err == nil || !strings.Contains(err.Error(), "must be") {
			t.Errorf("TakeTurn(%v, %v, %v) = %v, want an argument error", bad.rate, bad.capacity, bad.ahead, err)
		}
	}
	takeErr := func(rate, capacity float64) error {
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
			jobs, turn, _, err := te.c.TakeTurn(ctx, te.tenant, 1, rate, capacity, 0)
			if len(jobs) > 0 || turn.Wait > 0 {
				t.Fatalf("TakeTurn(%v, %v): %v, %+v; want an error", rate, capacity, turnIDs(jobs), turn)
			}
			if err != nil {
				return err
			}
		}
		t.Fatal("TakeTurn found no job in 20 s")
		return nil
	}
	var re redis.Error
	if err := takeErr(1e300, 2); !strings.Contains(err.Error(), "kafka_take: rate (ARGV[5]) 1000000000") || !strings.HasSuffix(err.Error(), "is out of range") || !errors.As(err, &re) {
		t.Errorf("rate 1e300: %v, want kafka_take's refusal of ARGV[5]", err)
	}
	if err := takeErr(1, 1e30); !strings.Contains(err.Error(), "kafka_take: capacity (ARGV[6])") {
		t.Errorf("capacity 1e30: %v, want kafka_take's refusal of ARGV[6]", err)
	}
	te.e.rdb.HSet(ctx, keys.Override(te.tenant), "outflow_rate", "1e300")
	if err := takeErr(1, 2); !strings.Contains(err.Error(), "kafka_take: override outflow_rate") {
		t.Errorf("override 1e300: %v, want kafka_take's refusal of the override", err)
	}
	te.e.rdb.Del(ctx, keys.Override(te.tenant))
	if jobs, _ := te.take(1, 2, 0); len(jobs) != 1 || jobs[0].Envelope.ID != "a" || jobs[0].Started != 1 {
		t.Errorf("after the refusals: %v, want a started", turnIDs(jobs))
	}
}

// TestKafkaTakeTurnRedisDown: with Redis unreachable TakeTurn hands the job
// out unstarted with no turn (the drainer asks the bucket itself), counting
// sluice_redis_errors_total{op="take"}; nothing is dropped.
func TestKafkaTakeTurnRedisDown(t *testing.T) {
	t.Parallel()
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	reg := prometheus.NewRegistry()
	e := newKafkaEnv(t, 1)
	tenant := testenv.Name(t, "kturndown")
	e.enqueue(tenant, 0, 2)
	cfg := e.consumerConfig()
	cfg.Redis = down
	c, _ := e.consumer(cfg, reg)
	te := &turnEnv{t: t, e: e, c: c, tenant: tenant}
	for i := range 2 {
		jobs, turn := te.take(1, 1, 0)
		if len(jobs) != 1 || jobs[0].Envelope.ID != jobID(tenant, i) || jobs[0].Started != 0 || jobs[0].Cancelled || turn != (queue.Turn{}) {
			t.Fatalf("take %d: %v, %+v; want %s unstarted with no turn", i, turnIDs(jobs), turn, jobID(tenant, i))
		}
	}
	if n := testenv.MetricValue(t, reg, "sluice_redis_errors_total", map[string]string{"op": "take"}); n < 2 {
		t.Errorf(`sluice_redis_errors_total{op="take"} = %v, want >= 2`, n)
	}
}
