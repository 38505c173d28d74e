package jobstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// TestPurgeKeepsOthersInBacklog: a purge takes only the purged jobs' cost
// off the backlog; a job in flight during the purge and a claimed one the
// drainer drops afterwards lower it no further than their own cost, so the
// jobs queued after the purge stay counted (Redis backend).
func TestPurgeKeepsOthersInBacklog(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	tenant := testenv.Name(t, "pb")
	enqueue(t, rdb, tenant, "a", "b", "c")
	c := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: time.Minute}))
	a := claim(t, c, tenant)
	start(t, rdb, a)         // in flight
	b := claim(t, c, tenant) // claimed, waiting for its slot
	if n, err := jobstate.Purge(ctx, rdb, tenant); err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v; want 2 (b and c)", n, err)
	}
	if bl, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int(); bl != 1 {
		t.Errorf("backlog after the purge = %d, want 1 (a, in flight)", bl)
	}
	enqueue(t, rdb, tenant, "d", "e")
	if err := c.Finish(ctx, a, queue.Outcome{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, b, queue.Outcome{Dropped: jobstate.Cancelled}); err != nil {
		t.Fatal(err)
	}
	bl, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int()
	if ql := rdb.LLen(ctx, keys.Queue(tenant)).Val(); int64(bl) != ql || ql != 2 {
		t.Errorf("backlog %d with %d jobs queued, want 2 and 2", bl, ql)
	}
}

// TestRedriveKafkaDeliveredBeforePostAck: on Kafka a redriven job (its
// state stripped of enqueued_at, as dlq's redrive does) that a drainer
// delivers before the producer's post-ack write stays done, out of the
// queued index; one the write comes first for becomes queued and indexed.
func TestRedriveKafkaDeliveredBeforePostAck(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	tenant := testenv.Name(t, "rk")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"x", "y"} {
		qj := []jobstate.QueuedJob{{ID: id, Type: "t", EnqueuedAt: t0, Cost: 1}}
		must(jobstate.EnqueueCall(tenant, 0, qj).Run(ctx, rdb).Err())
		must(jobstate.Settle{Tenant: tenant, JobID: id, Member: id + "|1", State: jobstate.Dead, Reason: "rejected", DeadLetter: `{"reason":"rejected"}`}.Call().Run(ctx, rdb).Err())
		must(rdb.HDel(ctx, keys.JobState(tenant, id), "enqueued_at").Err()) // the redrive
	}
	_, err := startRun(ctx, rdb, jobstate.Dispatch{Tenant: tenant, JobID: "x", Member: "x|2", Attempt: 1, Lease: time.Minute})
	must(err)
	must(jobstate.Settle{Tenant: tenant, JobID: "x", Member: "x|2", State: jobstate.Done}.Call().Run(ctx, rdb).Err())
	post := []jobstate.QueuedJob{{ID: "x", Type: "t", EnqueuedAt: time.Now(), Cost: 1}, {ID: "y", Type: "t", EnqueuedAt: time.Now(), Cost: 1}}
	must(jobstate.EnqueueCall(tenant, 0, post).Run(ctx, rdb).Err()) // the post-ack write
	queued := keys.JobIndex(tenant, jobstate.Queued)
	if r := get(t, rdb, tenant, "x"); r.State != jobstate.Done || rdb.ZScore(ctx, queued, "x").Err() == nil {
		t.Errorf("x delivered before the post-ack write: state %s, queued index %v; want done, absent", r.State, rdb.ZScore(ctx, queued, "x").Err())
	}
	if r := get(t, rdb, tenant, "y"); r.State != jobstate.Queued || r.Attempt != 0 || rdb.ZScore(ctx, queued, "y").Err() != nil {
		t.Errorf("y after the post-ack write: %+v (queued index %v); want queued, attempt 0, indexed", r, rdb.ZScore(ctx, queued, "y").Err())
	}
	// Both stay listed in the DLQ until dlq's redrive removes their letters.
	if n := rdb.ZCard(ctx, keys.JobIndex(tenant, "dead")).Val(); n != 2 {
		t.Errorf("dead index holds %d, want 2", n)
	}
}

// TestStartAttemptOfThisLife: the recorded attempt counts only for this
// life of the job. A dead state without enqueued_at (a redrive's previous
// life, dlq drops it) started before the redrive's post-ack write lands on
// Kafka is attempt 1, not the old count + 1; a state of the same
// enqueued_at counts on (a redelivery after a crash is 3 after 2).
func TestStartAttemptOfThisLife(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	tenant := testenv.Name(t, "life")
	at := time.UnixMilli(1_800_000_000_000)
	attemptOf := func(id string) int {
		t.Helper()
		v, err := jobstate.Dispatch{Tenant: tenant, JobID: id, Member: id + "|1", Attempt: 1, EnqueuedAt: at,
			Lease: time.Minute}.Call().Run(ctx, rdb).Result()
		if err != nil {
			t.Fatal(err)
		}
		s, err := jobstate.ReadStart(v)
		if err != nil || !s.Deliver {
			t.Fatalf("start of %s = %+v, %v", id, s, err)
		}
		return s.Attempt
	}
	rdb.HSet(ctx, keys.JobState(tenant, "redriven"), "state", "dead", "attempt", 4)
	if n := attemptOf("redriven"); n != 1 {
		t.Errorf("first start after a redrive (dead, no enqueued_at) = attempt %d, want 1", n)
	}
	rdb.HSet(ctx, keys.JobState(tenant, "again"), "state", "in_flight", "attempt", 2,
		"enqueued_at", at.UnixMilli())
	if n := attemptOf("again"); n != 3 {
		t.Errorf("a start of the same life after attempt 2 = %d, want 3", n)
	}
	rdb.HSet(ctx, keys.JobState(tenant, "older"), "state", "done", "attempt", 5,
		"enqueued_at", at.Add(-time.Hour).UnixMilli())
	if n := attemptOf("older"); n != 1 {
		t.Errorf("a new life under an id done before (another enqueued_at) = attempt %d, want 1", n)
	}
}
