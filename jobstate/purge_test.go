package jobstate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// TestPurgeRedisChunked: a purge of 2,500 queued jobs on the Redis backend
// empties the queue list and the delayed set in calls of at most
// jobstate.PurgeChunk jobs, cancels (purged) every waiting job, a claimed
// one that has not started included, leaves the job in flight, takes the
// purged jobs' cost off the backlog (the job in flight's stays) and lets a job queued afterwards through, with its position
// counted from the purge.
func TestPurgeRedisChunked(t *testing.T) {
	t.Parallel()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	tenant := testenv.Name(t, "pg")
	ids := make([]string, 2500)
	for i := range ids {
		ids[i] = fmt.Sprintf("j%04d", i)
	}
	enqueue(t, rdb, tenant, ids...)
	c := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: time.Minute}))
	flying := claim(t, c, tenant)
	start(t, rdb, flying)
	retry := claim(t, c, tenant)
	start(t, rdb, retry)
	next := retry.Envelope
	next.Attempt++
	if err := c.Defer(ctx, retry, queue.Retry{Delay: time.Hour, Next: next}); err != nil {
		t.Fatal(err)
	}
	claimed := claim(t, c, tenant) // waiting for its turn: still queued
	before := testenv.CommandCalls(t, rdb, "evalsha", "eval")

	n, err := jobstate.Purge(ctx, rdb, tenant)
	if err != nil || n != 2499 {
		t.Fatalf("Purge = %d, %v; want 2499 (all but the one in flight)", n, err)
	}
	if calls := testenv.CommandCalls(t, rdb, "evalsha", "eval") - before; calls < 3+1+1+1 || calls > 10 {
		t.Errorf("Purge ran %d scripts, want 6 to 10 (3 chunks of the queue, then the delayed set and the two indexes)", calls)
	}
	if l, d := rdb.LLen(ctx, keys.Queue(tenant)).Val(), rdb.ZCard(ctx, keys.Delayed(tenant)).Val(); l != 0 || d != 0 {
		t.Errorf("queue %d, delayed %d after the purge, want 0, 0", l, d)
	}
	if b, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int(); b != 1 {
		t.Errorf("backlog %d, want 1 (the job in flight)", b)
	}
	for _, id := range []string{retry.Envelope.ID, claimed.Envelope.ID, "j0003", "j2499"} {
		if r := get(t, rdb, tenant, id); r.State != jobstate.Cancelled || r.Reason != jobstate.ReasonPurged {
			t.Errorf("%s: state %s reason %q, want cancelled purged", id, r.State, r.Reason)
		}
	}
	if r := get(t, rdb, tenant, flying.Envelope.ID); r.State != jobstate.InFlight {
		t.Errorf("the job in flight is %s, want in_flight", r.State)
	}
	for _, s := range []string{jobstate.Queued, jobstate.Retrying} {
		if n := rdb.ZCard(ctx, keys.JobIndex(tenant, s)).Val(); n != 0 {
			t.Errorf("%s index holds %d after the purge", s, n)
		}
	}
	if ok, err := startRun(ctx, rdb, jobstate.Dispatch{Tenant: tenant, JobID: claimed.Envelope.ID, Member: claimed.Token(), Attempt: 1, Lease: time.Minute}); err != nil || ok {
		t.Errorf("start of the claimed, purged job = %v, %v; want false (dropped unsent)", ok, err)
	}
	enqueue(t, rdb, tenant, "after")
	if r := get(t, rdb, tenant, "after"); r.State != jobstate.Queued || r.Ahead != 0 {
		t.Errorf("job queued after the purge: %s ahead %d, want queued, 0", r.State, r.Ahead)
	}
	if j := claim(t, c, tenant); j.Envelope.ID != "after" || j.Cancelled {
		t.Errorf("next claim %s (cancelled %v), want the job queued after the purge", j.Envelope.ID, j.Cancelled)
	}
}

// TestPurgeKafkaMarks: on the Kafka backend (records only in the indexes,
// the jobs in the topic) a purge marks every queued and retrying job
// cancelled (purged), so the consumer's cancel check drops each; a job
// recorded after the purge began is not purged.
func TestPurgeKafkaMarks(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "pg")
	var qj []jobstate.QueuedJob
	for i := range 1500 {
		qj = append(qj, jobstate.QueuedJob{ID: fmt.Sprintf("k%04d", i), Type: "t", EnqueuedAt: t0})
	}
	if err := jobstate.EnqueueCall(tenant, 0, qj).Run(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	s := jobstate.Settle{Tenant: tenant, JobID: "k0000", Member: "k0000|1", State: jobstate.Retrying, Due: time.Now().Add(time.Hour)}
	if err := s.Call().Run(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Set(ctx, keys.Backlog(tenant), 1500, time.Hour)
	n, err := jobstate.Purge(ctx, rdb, tenant)
	if err != nil || n != 1500 {
		t.Fatalf("Purge = %d, %v; want 1500", n, err)
	}
	for _, id := range []string{"k0000", "k0001", "k1499"} {
		if r := get(t, rdb, tenant, id); r.State != jobstate.Cancelled || r.Reason != jobstate.ReasonPurged {
			t.Errorf("%s: state %s reason %q, want cancelled purged", id, r.State, r.Reason)
		}
	}
	if b, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int(); b != 0 {
		t.Errorf("backlog %d, want 0", b)
	}
	if d, _ := rdb.Get(ctx, keys.JobsDispatched(tenant)).Int(); d != 1500 {
		t.Errorf("dispatched sequence %d, want 1500 (every purged job left)", d)
	}
}

// TestListAndPurgeCluster: the index writes, the list and the purge stay in
// the tenant's hash slot, so they run on a Redis Cluster as on one server.
func TestListAndPurgeCluster(t *testing.T) {
	t.Parallel()
	rdb := testenv.Cluster(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "pc")
	enqueue(t, rdb, tenant, "a", "b", "c")
	page, err := jobstate.List(ctx, rdb, tenant, jobstate.Queued, nil, 2)
	if err != nil || len(page.Jobs) != 2 || page.Next == nil {
		t.Fatalf("List on the cluster = %+v, %v", page, err)
	}
	if page, err = jobstate.List(ctx, rdb, tenant, jobstate.Queued, page.Next, 2); err != nil || len(page.Jobs) != 1 || page.Jobs[0].JobID != "c" {
		t.Fatalf("page 2 on the cluster = %+v, %v", page, err)
	}
	if n, err := jobstate.Purge(ctx, rdb, tenant); err != nil || n != 3 {
		t.Fatalf("Purge on the cluster = %d, %v; want 3", n, err)
	}
	if r := get(t, rdb, tenant, "b"); r.State != jobstate.Cancelled || r.Reason != jobstate.ReasonPurged {
		t.Errorf("b after the purge: %s %q", r.State, r.Reason)
	}
}
