package kafkaq

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// wantKafkaTakeHops pins kafka_take.lua's commands (EVALSHA and every
// command it runs) for a take of 1 job and of 4 jobs in one call, jobs of a
// tenant whose keys exist (the common case), and of the finish that
// follows the second (kafka_finish.lua, as wantKafkaHops' "finish"). Per
// call EVALSHA, TIME, the in_flight index's ZADD and PEXPIRE, the
// sequence's GET and SET, the deliveries' ZADD and PEXPIRE, the queued
// index's ZREM for all the started jobs (9); per job HMGET, HSET, PEXPIRE
// (3; the queued index's ZREM was one per job: take 4 was 23). Before Take, a job's
// claim and start cost 3 + 13 commands in two calls.
var wantKafkaTakeHops = map[string]int64{
	"take 1":   11, // raise_seq: one SET ... GET, was GET + SET
	"take 4":   20,
	"finish 1": 10,
}

// memConsumer is a consumer on rdb without a broker: one active partition,
// whose FIFOs put fills.
func memConsumer(t *testing.T, rdb redis.UniversalClient) (*Consumer, func(tenant string, raw []byte)) {
	t.Helper()
	m, err := newConsumerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &Consumer{rdb: rdb, log: slog.Default(), m: m, prefix: "mem", clock: clock.Or(nil),
		cfg:      ConsumerConfig{ClaimWait: time.Millisecond, Lease: time.Minute, MaxTenantJobs: 100, MaxPartitionJobs: 100},
		finishes: newFinishGroup(rdb), tenants: map[string]*tenantQueue{},
		claimed: map[*queue.Claimed]*entry{}, holding: map[string]*queue.Claimed{}, settled: make(chan struct{}, 1)}
	p := newPartState(0, 0)
	next := int64(0)
	return c, func(tenant string, raw []byte) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.pushLocked(p, c.fifoLocked(p, tenant), next, raw, "")
		next++
	}
}

// TestKafkaTakeHopCommands counts one Take of 1 job and one of 4 on a
// private Redis, after the jobs' post-ack writes, and the fused finish of
// a single job (docs/perf.md: claim + start in one call); the first take
// and finish make the tenant's keys and are not pinned.
func TestKafkaTakeHopCommands(t *testing.T) {
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	if err := lua.LoadAll(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	c, put := memConsumer(t, rdb)
	k, err := newBacklog(rdb, slog.Default(), nil, "hops")
	if err != nil {
		t.Fatal(err)
	}
	tenant := testenv.Name(t, "takehops")
	got := map[string]int64{}
	hop := func(name string, f func()) {
		before := testenv.CommandTotal(t, rdb)
		f()
		got[name] = testenv.CommandTotal(t, rdb) - before
	}
	// The warm finish and the counted one fall in one second of the
	// consumer's clock (keys.Refresh).
	time.Sleep(time.Second - time.Duration(time.Now().Nanosecond()))
	n := 0
	for round, size := range []int{1, 1, 4} {
		for range size {
			n++
			env := queue.Envelope{Version: queue.EnvelopeVersion, ID: fmt.Sprintf("j%d", n), Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now()}
			raw, err := env.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if failed := k.write(oneJob(env), true); failed.jobs != 0 || len(failed.cost) != 0 {
				t.Fatalf("post-ack write failed: %+v", failed)
			}
			put(tenant, raw)
		}
		name := fmt.Sprintf("take %d", size)
		if round == 0 {
			name = "warm " + name
		}
		var jobs []*queue.Claimed
		hop(name, func() {
			if jobs, _, err = c.Take(ctx, tenant, size); err != nil || len(jobs) != size {
				t.Fatalf("take %d: %d jobs, %v", size, len(jobs), err)
			}
		})
		for _, j := range jobs {
			if j.Started != 1 {
				t.Fatalf("%s: started %d, want 1", j.Envelope.ID, j.Started)
			}
		}
		if round < 2 {
			hop(map[int]string{0: "warm finish 1", 1: "finish 1"}[round], func() { c.lowerBacklog(ctx, jobs[0], queue.Outcome{}) })
		}
	}
	if s := rdb.Get(ctx, keys.JobsDispatched(tenant)).Val(); s != "6" {
		t.Errorf("dispatched sequence %q, want 6", s)
	}
	if n := rdb.ZCard(ctx, keys.JobIndex(tenant, jobstate.InFlight)).Val(); n != 4 {
		t.Errorf("in_flight index %d, want 4 (6 taken, 2 finished)", n)
	}
	if bad := testenv.KeysWithoutTTL(t, rdb, "sluice:{"+tenant+"}*"); len(bad) > 0 {
		t.Errorf("keys without a TTL after the run: %v", bad)
	}
	pinned := map[string]int64{}
	for h := range wantKafkaTakeHops {
		pinned[h] = got[h]
	}
	if d := cmp.Diff(wantKafkaTakeHops, pinned); d != "" {
		t.Errorf("Redis commands per hop (-want +got):\n%s\nall readings: %v", d, got)
	}
}

// wantKafkaTakeTurnHops pins kafka_take.lua's commands for a shaped
// tenant's TakeTurn of one job: granted, the take's 12 plus the bucket's
// override and water HMGETs and the water's HSET and PEXPIRE (before
// TakeTurn: the claim's job_cancelled.lua, leaky_bucket.lua and
// job_state_dispatch.lua, 3 + 6 + 13 in three calls); refused, EVALSHA,
// TIME and the two HMGETs (the job is not read: it goes back to its FIFO).
var wantKafkaTakeTurnHops = map[string]int64{
	"take turn granted": 15,
	"take turn refused": 4,
}

// TestKafkaTakeTurnHopCommands counts a shaped tenant's TakeTurn on a
// private Redis, after the jobs' post-ack writes: granted (the claim, the
// turn and the start in one call) and refused; the first take makes the
// tenant's keys and is not pinned. The refused job is the next one taken.
func TestKafkaTakeTurnHopCommands(t *testing.T) {
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	if err := lua.LoadAll(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	c, put := memConsumer(t, rdb)
	k, err := newBacklog(rdb, slog.Default(), nil, "hops")
	if err != nil {
		t.Fatal(err)
	}
	tenant := testenv.Name(t, "turnhops")
	got := map[string]int64{}
	for i, name := range []string{"warm", "take turn granted", "take turn refused"} {
		env := queue.Envelope{Version: queue.EnvelopeVersion, ID: fmt.Sprintf("j%d", i), Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now()}
		raw, err := env.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if failed := k.write(oneJob(env), true); failed.jobs != 0 || len(failed.cost) != 0 {
			t.Fatalf("post-ack write failed: %+v", failed)
		}
		put(tenant, raw)
		before := testenv.CommandTotal(t, rdb)
		jobs, turn, _, err := c.TakeTurn(ctx, tenant, 1, 0.001, 2, 0)
		got[name] = testenv.CommandTotal(t, rdb) - before
		if granted := i < 2; err != nil || (len(jobs) == 1) != granted || (turn.Wait > 0) == granted {
			t.Fatalf("%s: %d jobs, %+v, %v", name, len(jobs), turn, err)
		}
		if len(jobs) == 1 && jobs[0].Started != 1 {
			t.Fatalf("%s: started %d, want 1", name, jobs[0].Started)
		}
	}
	if jobs, _, err := c.Take(ctx, tenant, 4); err != nil || len(jobs) != 1 || jobs[0].Envelope.ID != "j2" || jobs[0].Started != 1 {
		t.Errorf("after the refused take: %d jobs (%v), want j2 started", len(jobs), err)
	}
	if bad := testenv.KeysWithoutTTL(t, rdb, "sluice:{"+tenant+"}*"); len(bad) > 0 {
		t.Errorf("keys without a TTL after the run: %v", bad)
	}
	pinned := map[string]int64{}
	for h := range wantKafkaTakeTurnHops {
		pinned[h] = got[h]
	}
	if d := cmp.Diff(wantKafkaTakeTurnHops, pinned); d != "" {
		t.Errorf("Redis commands per hop (-want +got):\n%s\nall readings: %v", d, got)
	}
}
