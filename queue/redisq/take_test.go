package redisq_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// takeEnv is a tenant on the shared Redis with a producer and a consumer.
type takeEnv struct {
	t      *testing.T
	rdb    *redis.Client
	tenant string
	prod   *redisq.Producer
	cons   *redisq.Consumer
}

func newTakeEnv(t *testing.T) *takeEnv {
	t.Helper()
	rdb := testenv.Redis(t)
	prod, cons := takeParts(t, rdb)
	return &takeEnv{t: t, rdb: rdb, tenant: testenv.Name(t, "take"), prod: prod, cons: cons}
}

// takeParts loads the scripts on rdb and returns a producer and a consumer
// (lease one minute) of it.
func takeParts(t *testing.T, rdb redis.UniversalClient) (*redisq.Producer, *redisq.Consumer) {
	t.Helper()
	if err := lua.LoadAll(context.Background(), rdb); err != nil {
		t.Fatal(err)
	}
	prod, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return prod, cons
}

func (e *takeEnv) enqueue(envs ...queue.Envelope) {
	e.t.Helper()
	for i := range envs {
		envs[i].Tenant, envs[i].Type, envs[i].Cost = e.tenant, "t", 1
		if envs[i].EnqueuedAt.IsZero() {
			envs[i].EnqueuedAt = time.Now().UTC()
		}
	}
	if err := e.prod.Enqueue(context.Background(), envs); err != nil {
		e.t.Fatal(err)
	}
}

func (e *takeEnv) take(k int) []*queue.Claimed {
	e.t.Helper()
	jobs, _, err := e.cons.Take(context.Background(), e.tenant, k)
	if err != nil {
		e.t.Fatal(err)
	}
	return jobs
}

func (e *takeEnv) state(id string) jobstate.Record {
	e.t.Helper()
	r, err := jobstate.Get(context.Background(), e.rdb, e.tenant, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestTakeStartsPlainJobs: one Take leases up to k head jobs in order and
// records each one's delivery start as the separate start does (state
// in_flight, attempt 1, the in_flight index, the deliveries in progress,
// the dispatched sequence) and counts their units in the tenant's outflow
// (queue.Claimed.Counted); the next Take gets the rest; an empty queue
// answers the poll wait.
func TestTakeStartsPlainJobs(t *testing.T) {
	t.Parallel()
	e := newTakeEnv(t)
	ctx := context.Background()
	e.enqueue(queue.Envelope{ID: "a"}, queue.Envelope{ID: "b"}, queue.Envelope{ID: "c"}, queue.Envelope{ID: "d"}, queue.Envelope{ID: "e"})
	jobs := e.take(3)
	if len(jobs) != 3 {
		t.Fatalf("took %d jobs, want 3", len(jobs))
	}
	for i, j := range jobs {
		if want := string(rune('a' + i)); j.Envelope.ID != want || j.Started != 1 {
			t.Errorf("job %d: id %q started %d, want %q started 1", i, j.Envelope.ID, j.Started, want)
		}
		if r := e.state(j.Envelope.ID); r.State != jobstate.InFlight || r.Attempt != 1 {
			t.Errorf("job %s recorded %s attempt %d, want in_flight attempt 1", j.Envelope.ID, r.State, r.Attempt)
		}
	}
	if n := e.rdb.ZCard(ctx, keys.Delivering(e.tenant)).Val(); n != 0 || !jobs[0].InLease {
		t.Errorf("keys.Delivering holds %d, InLease %v; want 0 and true (the lease is the delivery)", n, jobs[0].InLease)
	}
	if n := e.rdb.ZCard(ctx, keys.JobIndex(e.tenant, jobstate.InFlight)).Val(); n != 3 {
		t.Errorf("in_flight index %d, want 3", n)
	}
	if n := e.rdb.ZCard(ctx, keys.JobIndex(e.tenant, jobstate.Queued)).Val(); n != 2 {
		t.Errorf("queued index %d, want 2", n)
	}
	if s := e.rdb.Get(ctx, keys.JobsDispatched(e.tenant)).Val(); s != "3" {
		t.Errorf("dispatched sequence %q, want 3", s)
	}
	if n := e.rdb.ZCard(ctx, keys.Processing(e.tenant)).Val(); n != 3 {
		t.Errorf("leases %d, want 3", n)
	}
	if units := outflowUnits(t, e.rdb, e.tenant); units != 3 || !jobs[0].Counted {
		t.Errorf("outflow %d units, Counted %v; want 3 (the started jobs, counted by the take) and true", units, jobs[0].Counted)
	}
	if rest := e.take(10); len(rest) != 2 || rest[0].Envelope.ID != "d" || rest[1].Envelope.ID != "e" {
		t.Errorf("second take %v, want d, e", ids(rest))
	}
	jobs, wait, err := e.cons.Take(ctx, e.tenant, 4)
	if err != nil || len(jobs) != 0 || wait != redisq.DefaultPoll {
		t.Errorf("empty take = %v, %v, %v; want none, %v, nil", ids(jobs), wait, err, redisq.DefaultPoll)
	}
	if bad := testenv.KeysWithoutTTL(t, e.rdb, "sluice:{"+e.tenant+"}*"); len(bad) > 0 {
		t.Errorf("keys without a TTL: %v", bad)
	}
}

// TestTakeLeavesChecksToTheDrainer: a job the drainer must look at before
// it starts (cancelled, done already, with a deadline, a heartbeat job) is
// leased but not started (Started 0, its state untouched), with Claim's
// flags; a reaped job taken again counts its second start.
func TestTakeLeavesChecksToTheDrainer(t *testing.T) {
	t.Parallel()
	e := newTakeEnv(t)
	ctx := context.Background()
	soon := time.Now().Add(time.Hour).UTC()
	enq := time.Now().UTC().Truncate(time.Millisecond)
	e.enqueue(queue.Envelope{ID: "cancelled"}, queue.Envelope{ID: "done", EnqueuedAt: enq},
		queue.Envelope{ID: "deadline", Deadline: &soon}, queue.Envelope{ID: "beat", HeartbeatMS: 60000},
		queue.Envelope{ID: "plain"})
	if err := jobstate.Cancel(ctx, e.rdb, e.tenant, "cancelled"); err != nil {
		t.Fatal(err)
	}
	e.rdb.HSet(ctx, keys.JobState(e.tenant, "done"), "state", jobstate.Done)
	jobs := e.take(8)
	if len(jobs) != 5 {
		t.Fatalf("took %v, want 5 jobs", ids(jobs))
	}
	want := map[string]int{"cancelled": 0, "done": 0, "deadline": 0, "beat": 0, "plain": 1}
	for _, j := range jobs {
		if j.Started != want[j.Envelope.ID] {
			t.Errorf("%s started %d, want %d", j.Envelope.ID, j.Started, want[j.Envelope.ID])
		}
	}
	if !jobs[0].Cancelled || !jobs[1].Duplicate || jobs[4].Cancelled || jobs[4].Duplicate {
		t.Errorf("flags: cancelled %v, duplicate %v, plain %v/%v", jobs[0].Cancelled, jobs[1].Duplicate, jobs[4].Cancelled, jobs[4].Duplicate)
	}
	if r := e.state("deadline"); r.State != jobstate.Queued || r.Attempt != 0 {
		t.Errorf("deadline job recorded %s attempt %d, want queued 0", r.State, r.Attempt)
	}
	// The plain job's lease lapses: the reaper returns it and the next take
	// starts it as attempt 2.
	e.rdb.ZAdd(ctx, keys.Processing(e.tenant), redis.Z{Score: 1, Member: jobs[4].Token()})
	if n, err := e.cons.Reap(ctx, e.tenant); err != nil || n < 1 {
		t.Fatalf("reap: %d, %v", n, err)
	}
	again := e.take(1)
	if len(again) != 1 || again[0].Envelope.ID != "plain" || again[0].Started != 2 {
		t.Errorf("taken again: %v started %v, want plain started 2", ids(again), started(again))
	}
}

func ids(jobs []*queue.Claimed) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Envelope.ID
	}
	return out
}

func started(jobs []*queue.Claimed) []int {
	out := make([]int, len(jobs))
	for i, j := range jobs {
		out[i] = j.Started
	}
	return out
}

// wantTakeHops pins take.lua's commands (EVALSHA and every command it runs)
// for one job and for 4 jobs in one call, second jobs of a tenant whose keys
// exist (the common case); see wantRedisHops.
var wantTakeHops = map[string]int64{
	// The dispatched sequence: one SET ... GET (raise_seq), was GET + SET.
	// The outflow of the started jobs' second (HINCRBY, PEXPIRE, HLEN) is 3
	// more, and saves the drainer's outflow_add.lua call (6 commands) of
	// each tenant and second.
	"take 1": 18,
	// Per job HMGET, HSET, PEXPIRE (3); the started jobs leave the queued
	// index in one ZREM per call (was one per job: 30).
	"take 4": 27,
	// ack.lua without the deliveries set (Claimed.InLease): 12 - 1.
	"finish after a take": 11,
}

// TestRedisTakeHopCommands counts take.lua's commands on a private Redis
// (docs/perf.md: claim + start in one call, 24 commands in two before).
func TestRedisTakeHopCommands(t *testing.T) {
	h := newHopCounter(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "takehops")
	prod, err := redisq.NewProducer(redisq.ProducerConfig{Redis: h.rdb})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := redisq.NewConsumer(redisq.ConsumerConfig{Redis: h.rdb})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range []int{1, 1, 4} {
		envs := make([]queue.Envelope, k)
		for i := range envs {
			n++
			envs[i] = queue.Envelope{ID: "j" + string(rune('a'+n)), Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now().UTC()}
		}
		if err := prod.Enqueue(ctx, envs); err != nil {
			t.Fatal(err)
		}
		var jobs []*queue.Claimed
		h.hop("take "+string(rune('0'+k)), func() {
			jobs, _, err = cons.Take(ctx, tenant, k)
			if err != nil || len(jobs) != k || jobs[0].Started != 1 {
				t.Fatalf("take %d: %v, %v", k, started(jobs), err)
			}
		})
		h.hop("finish after a take", func() {
			if err := cons.Finish(ctx, jobs[0], queue.Outcome{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	got := map[string]int64{}
	for k := range wantTakeHops {
		got[k] = h.got[k]
	}
	if d := cmp.Diff(wantTakeHops, got); d != "" {
		t.Errorf("take.lua commands (-want +got):\n%s", d)
	}
}

// TestUntakeUndoesTheStart: a taken job given back before it was sent
// (Untake) is queued again with its recorded start undone (state queued,
// attempt 0, back in the queued index, cancellable), so its next take
// starts it as attempt 1 again.
func TestUntakeUndoesTheStart(t *testing.T) {
	t.Parallel()
	e := newTakeEnv(t)
	ctx := context.Background()
	e.enqueue(queue.Envelope{ID: "u"})
	jobs := e.take(1)
	if len(jobs) != 1 || jobs[0].Started != 1 {
		t.Fatalf("take: %v started %v", ids(jobs), started(jobs))
	}
	if err := e.cons.Untake(ctx, jobs[0]); err != nil {
		t.Fatal(err)
	}
	if r := e.state("u"); r.State != jobstate.Queued || r.Attempt != 0 {
		t.Errorf("after Untake: %s attempt %d, want queued 0", r.State, r.Attempt)
	}
	if n := e.rdb.ZCard(ctx, keys.JobIndex(e.tenant, jobstate.Queued)).Val(); n != 1 {
		t.Errorf("queued index %d, want 1", n)
	}
	if n := e.rdb.ZCard(ctx, keys.JobIndex(e.tenant, jobstate.InFlight)).Val(); n != 0 {
		t.Errorf("in_flight index %d, want 0", n)
	}
	if n := e.rdb.ZCard(ctx, keys.Processing(e.tenant)).Val(); n != 0 {
		t.Errorf("leases %d after Untake, want 0", n)
	}
	again := e.take(1)
	if len(again) != 1 || again[0].Started != 1 {
		t.Errorf("taken again: %v started %v, want started 1", ids(again), started(again))
	}
	if err := e.cons.Untake(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	if err := jobstate.Cancel(ctx, e.rdb, e.tenant, "u"); err != nil {
		t.Errorf("Cancel after Untake = %v, want nil (the job is queued)", err)
	}
}

// outflowUnits sums the tenant's outflow per second (keys.Outflow).
func outflowUnits(t *testing.T, rdb redis.UniversalClient, tenant string) int64 {
	t.Helper()
	var sum int64
	for _, v := range rdb.HVals(context.Background(), keys.Outflow(tenant)).Val() {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("outflow field %q: %v", v, err)
		}
		sum += n
	}
	return sum
}
