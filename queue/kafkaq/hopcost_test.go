package kafkaq

import (
	"context"
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

// wantKafkaHops pins the Redis commands of each hop of one job on the Kafka
// backend (docs/perf.md section 1.2; EVALSHA and every command a script runs
// counted, as INFO commandstats does). A script that gains a command fails
// TestKafkaHopCommands: raise the figure only with a reason in the commit
// and docs/architecture.md. The outflow turn and slot are the Redis
// backend's (queue/redisq TestRedisHopCommands).
var wantKafkaHops = map[string]int64{
	"post-ack write":            13,
	"claim":                     3,
	"start":                     13,
	"start, first of a second":  13,
	"outflow flush":             6,
	"finish":                    10, // one HMGET for the purge check and the index move (was HGET + HMGET)
	"finish, first of a second": 13,
}

// TestKafkaHopCommands drives two jobs of one tenant through the Kafka
// backend's Redis writes on a private Redis, without a broker: the
// post-ack write of the producer (backlog.write), the claim's cancel check
// (newClaimed), the delivery start (jobstate.Dispatch, as the drainer
// makes it) and the finish (lowerBacklog), and compares each hop's
// commands with wantKafkaHops. The first job makes the tenant's keys and is
// the first start of its second; the second job is the common case.
func TestKafkaHopCommands(t *testing.T) {
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	if err := lua.LoadAll(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	c, k := redisSides(t, rdb, "hops")
	tenant := testenv.Name(t, "hops")
	got := map[string]int64{}
	hop := func(name string, f func()) {
		before := testenv.CommandTotal(t, rdb)
		f()
		got[name] = testenv.CommandTotal(t, rdb) - before
	}
	// Both starts fall in one second of Redis TIME (same host).
	time.Sleep(time.Second - time.Duration(time.Now().Nanosecond()))
	for i, id := range []string{"first", "second"} {
		name := func(h string) string {
			if i == 0 {
				return "warm " + h
			}
			return h
		}
		env := queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now()}
		raw, err := env.Encode()
		if err != nil {
			t.Fatal(err)
		}
		hop(name("post-ack write"), func() {
			if failed := k.write(oneJob(env), true); failed.jobs != 0 || len(failed.cost) != 0 {
				t.Fatalf("post-ack write failed: %+v", failed)
			}
		})
		var job *queue.Claimed
		hop(name("claim"), func() { job = c.newClaimed(ctx, testEntry(raw), tenant) })
		if job.DecodeErr != nil || job.Cancelled || job.Duplicate {
			t.Fatalf("claim: %+v", job)
		}
		start := "start"
		if i == 0 {
			start = "start, first of a second"
		}
		hop(start, func() {
			d := jobstate.Dispatch{Tenant: tenant, JobID: id, Member: job.Token(), Attempt: 1,
				EnqueuedAt: env.EnqueuedAt, Lease: time.Minute}
			if st, err := jobstate.ReadStart(d.Call().Run(ctx, rdb).Val()); err != nil || !st.Deliver {
				t.Fatalf("start: %+v, %v", st, err)
			}
		})
		finish := "finish"
		if i == 0 {
			finish = "finish, first of a second"
		}
		hop(finish, func() { c.lowerBacklog(ctx, job, queue.Outcome{}) })
	}
	hop("outflow flush", func() {
		a := jobstate.OutflowAdd{Tenant: tenant, Units: map[int64]int64{time.Now().Unix(): 2}}
		if n, err := jobstate.OutflowAddReply(a.Call().Run(ctx, rdb).Val()); err != nil || n != 1 {
			t.Fatalf("outflow flush: %d, %v", n, err)
		}
	})
	if bad := testenv.KeysWithoutTTL(t, rdb, "sluice:{"+tenant+"}*"); len(bad) > 0 {
		t.Errorf("keys without a TTL after the run: %v", bad)
	}
	pinned := map[string]int64{}
	for h := range wantKafkaHops {
		pinned[h] = got[h]
	}
	if d := cmp.Diff(wantKafkaHops, pinned); d != "" {
		t.Errorf("Redis commands per hop (-want +got):\n%s\nall readings: %v", d, got)
	}
	if n := rdb.ZCard(ctx, keys.JobIndex(tenant, "done")).Val(); n != 2 {
		t.Errorf("done index holds %d jobs, want 2", n)
	}
}

// redisSides returns a consumer and a producer's backlog writer on rdb,
// without a broker, so a test drives the Kafka backend's own Redis writes
// (the post-ack backlog.write, newClaimed, lowerBacklog) by hand.
func redisSides(t *testing.T, rdb redis.UniversalClient, prefix string) (*Consumer, *backlog) {
	t.Helper()
	m, err := newConsumerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &Consumer{rdb: rdb, log: slog.Default(), m: m, prefix: prefix, clock: clock.Or(nil), finishes: newFinishGroup(rdb)}
	k, err := newBacklog(rdb, slog.Default(), nil, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// testEntry is a record of partition 0 holding raw, for newClaimed.
func testEntry(raw []byte) *entry {
	return &entry{raw: raw, fifo: &fifo{p: newPartState(0, 0)}}
}

// oneJob is the counts of one acknowledged job, as backlog.add builds them.
func oneJob(e queue.Envelope) counts {
	c := newCounts()
	c.addJob(e.Tenant, e.Cost, &jobstate.QueuedJob{ID: e.ID, Type: e.Type, EnqueuedAt: e.EnqueuedAt, Cost: e.Cost})
	return c
}
