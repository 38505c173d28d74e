package jobstate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// listIDs lists one page and returns its ids (with the position of queued
// ones) and its next cursor.
func listIDs(t *testing.T, rdb redis.UniversalClient, tenant, state string, after *jobstate.Cursor, limit int) ([]string, *jobstate.Cursor) {
	t.Helper()
	page, err := jobstate.List(context.Background(), rdb, tenant, state, after, limit)
	if err != nil {
		t.Fatalf("List(%s, %s): %v", tenant, state, err)
	}
	ids := []string{}
	for _, r := range page.Jobs {
		if r.State != state {
			t.Errorf("List(%s) gave %s in state %s", state, r.JobID, r.State)
		}
		id := r.JobID
		if state == jobstate.Queued {
			id = fmt.Sprintf("%s@%d", id, r.Ahead)
		}
		ids = append(ids, id)
	}
	return ids, page.Next
}

// TestListRedisMovingQueue: pages of the queued list follow the queue order
// with positions, and a cursor stays right while jobs leave the queue (the
// cursor's own job included); in_flight and retrying list what moved there,
// in start and due order. Redis backend (the producer's enqueue.lua and the
// consumer's scripts).
func TestListRedisMovingQueue(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "jl")
	enqueue(t, rdb, tenant, "a", "b", "c", "d", "e", "f", "g")
	c := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: time.Minute}))

	got, next := listIDs(t, rdb, tenant, jobstate.Queued, nil, 3)
	if diff := cmp.Diff([]string{"a@0", "b@1", "c@2"}, got); diff != "" || next == nil {
		t.Fatalf("page 1 (-want +got):\n%s next %v", diff, next)
	}
	// a, b and c (the cursor's job) and d leave the queue meanwhile.
	var started []*queue.Claimed
	for range 4 {
		j := claim(t, c, tenant)
		start(t, rdb, j)
		started = append(started, j)
	}
	got, next = listIDs(t, rdb, tenant, jobstate.Queued, next, 3)
	if diff := cmp.Diff([]string{"e@0", "f@1", "g@2"}, got); diff != "" {
		t.Errorf("page 2 after the queue moved (-want +got):\n%s", diff)
	}
	if next != nil {
		t.Errorf("page 2 is the last, next = %v", next)
	}
	got, _ = listIDs(t, rdb, tenant, jobstate.InFlight, nil, 10)
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, got); diff != "" {
		t.Errorf("in_flight (-want +got):\n%s", diff)
	}
	for i, j := range started[:2] {
		next := j.Envelope
		next.Attempt++
		if err := c.Defer(ctx, j, queue.Retry{Delay: time.Duration(2-i) * time.Hour, Next: next, LastError: "500"}); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = listIDs(t, rdb, tenant, jobstate.Retrying, nil, 10)
	if diff := cmp.Diff([]string{"b", "a"}, got); diff != "" {
		t.Errorf("retrying, by due time (-want +got):\n%s", diff)
	}
	got, _ = listIDs(t, rdb, tenant, jobstate.InFlight, nil, 10)
	if diff := cmp.Diff([]string{"c", "d"}, got); diff != "" {
		t.Errorf("in_flight after two retries (-want +got):\n%s", diff)
	}
	if err := c.Finish(ctx, started[2], queue.Outcome{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, started[3], queue.Outcome{}); err != nil {
		t.Fatal(err)
	}
	got, _ = listIDs(t, rdb, tenant, jobstate.Done, nil, 10)
	if diff := cmp.Diff([]string{"d", "c"}, got); diff != "" {
		t.Errorf("done, newest first (-want +got):\n%s", diff)
	}
	if err := jobstate.Cancel(ctx, rdb, tenant, "e"); err != nil {
		t.Fatal(err)
	}
	got, _ = listIDs(t, rdb, tenant, jobstate.Queued, nil, 10)
	if diff := cmp.Diff([]string{"f@1", "g@2"}, got); diff != "" {
		t.Errorf("queued after cancelling e (-want +got):\n%s", diff)
	}
}

// TestListKafkaStatesAndStale: the Kafka backend's records (the post-ack
// enqueue, a start, settles) fill the same indexes; an id whose state hash
// expired or moved on is skipped and removed; a scheduled job put in its
// index (the scheduler's write) is listed.
func TestListKafkaStatesAndStale(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "jl")
	var qj []jobstate.QueuedJob
	for _, id := range []string{"k1", "k2", "k3", "k4"} {
		qj = append(qj, jobstate.QueuedJob{ID: id, Type: "t", EnqueuedAt: t0})
	}
	if err := jobstate.EnqueueCall(tenant, 0, qj).Run(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := startRun(ctx, rdb, jobstate.Dispatch{Tenant: tenant, JobID: "k1", Member: "k1|1", Attempt: 1, Lease: time.Minute}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	due := time.Now().Add(time.Hour)
	for _, s := range []jobstate.Settle{{JobID: "k1", State: jobstate.Retrying, LastError: "500", Due: due}, {JobID: "k2", State: jobstate.Done}} {
		s.Tenant, s.Member = tenant, s.JobID+"|1"
		if err := s.Call().Run(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if sc, _ := rdb.ZScore(ctx, keys.JobIndex(tenant, jobstate.Retrying), "k1").Result(); int64(sc) != due.UnixMilli() {
		t.Errorf("retrying score %v, want the due time %d", sc, due.UnixMilli())
	}
	rdb.Del(ctx, keys.JobState(tenant, "k3"))                                                 // expired
	rdb.ZAdd(ctx, keys.JobIndex(tenant, jobstate.Queued), redis.Z{Score: 9, Member: "ghost"}) // never recorded
	rdb.HSet(ctx, keys.JobState(tenant, "s1"), "state", jobstate.Scheduled)
	rdb.ZAdd(ctx, keys.JobIndex(tenant, jobstate.Scheduled), redis.Z{Score: 5, Member: "s1"})
	for state, want := range map[string][]string{
		jobstate.Queued: {"k4@2"}, jobstate.Retrying: {"k1"}, jobstate.Done: {"k2"}, jobstate.InFlight: {},
		jobstate.Scheduled: {"s1"}, jobstate.Dead: {},
	} {
		got, next := listIDs(t, rdb, tenant, state, nil, 10)
		if diff := cmp.Diff(want, got); diff != "" || next != nil {
			t.Errorf("%s (-want +got):\n%s next %v", state, diff, next)
		}
	}
	if n, _ := rdb.ZCard(ctx, keys.JobIndex(tenant, jobstate.Queued)).Result(); n != 1 {
		t.Errorf("queued index holds %d ids after the list, want 1 (the stale ones removed)", n)
	}
}

// TestListDoneBounds: the done index keeps keys.DoneMax ids per tenant and
// none older than keys.DoneRetention, trimmed by the finish that adds one.
func TestListDoneBounds(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "jl")
	dk := keys.JobIndex(tenant, jobstate.Done)
	defer rdb.Del(ctx, dk)
	now := time.Now().UnixMilli()
	zs := make([]redis.Z, 0, keys.DoneMax+1)
	zs = append(zs, redis.Z{Score: float64(now - keys.DoneRetention.Milliseconds() - 1000), Member: "too-old"})
	for i := range keys.DoneMax {
		zs = append(zs, redis.Z{Score: float64(now - 60000 + int64(i)), Member: fmt.Sprintf("d%05d", i)})
	}
	for i := 0; i < len(zs); i += 1000 {
		if err := rdb.ZAdd(ctx, dk, zs[i:min(i+1000, len(zs))]...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s := jobstate.Settle{Tenant: tenant, JobID: "last", Member: "last|1", State: jobstate.Done}
	if err := s.Call().Run(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.ZCard(ctx, dk).Result(); n != keys.DoneMax {
		t.Errorf("done index holds %d, want keys.DoneMax = %d", n, keys.DoneMax)
	}
	for member, kept := range map[string]bool{"too-old": false, "d00000": false, "d00001": true, "last": true} {
		_, err := rdb.ZScore(ctx, dk, member).Result()
		if (err == nil) != kept {
			t.Errorf("%s kept = %v, want %v", member, err == nil, kept)
		}
	}
	if ttl := rdb.PTTL(ctx, dk).Val(); ttl <= 0 || ttl > keys.JobStateTTL {
		t.Errorf("done index TTL %v, want (0, %v]", ttl, keys.JobStateTTL)
	}
}
