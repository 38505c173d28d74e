package scheduler

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

// TestCancelDuringMoveWithoutDone: a job cancelled while a scheduler moves
// it stays cancelled on the Redis backend even when the move's end
// (schedule_done.lua) never runs, as when the drainer dies or Redis times
// out after the enqueue: the move's enqueue finds the cancelled state and
// queues nothing, so no drainer can deliver it; a later job under the same
// id (another enqueued_at) is queued as usual.
func TestCancelDuringMoveWithoutDone(t *testing.T) {
	t.Parallel()
	rdb, tenant := scheduledTenant(t, "nodone")
	ctx := context.Background()
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Redis: rdb, Producer: p, Lease: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := Add(ctx, rdb, tenant, []Job{job(tenant, "x", time.Now())}, 10); err != nil {
		t.Fatal(err)
	}
	r, err := s.take(ctx, tenant, 10)
	if err != nil || len(r.Jobs) != 1 {
		t.Fatalf("take = %+v, %v; want the due job", r, err)
	}
	if ok, _, err := Cancel(ctx, rdb, tenant, "x"); err != nil || !ok {
		t.Fatalf("Cancel during the move = %v, %v; want cancelled", ok, err)
	}
	env, err := queue.Decode([]byte(r.Jobs[0].Envelope))
	if err != nil {
		t.Fatal(err)
	}
	// The move's enqueue, and no schedule_done after it.
	if err := p.Enqueue(ctx, []queue.Envelope{env}); err != nil {
		t.Fatal(err)
	}
	if n := rdb.LLen(ctx, keys.Queue(tenant)).Val(); n != 0 {
		t.Errorf("the cancelled job's move pushed %d jobs onto the queue, want 0", n)
	}
	if b, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int64(); b != 0 {
		t.Errorf("backlog %d after the cancelled job's move, want 0", b)
	}
	if rec, err := jobstate.Get(ctx, rdb, tenant, "x"); err != nil || rec.State != jobstate.Cancelled {
		t.Errorf("state after the move's enqueue %q (%v), want cancelled", rec.State, err)
	}
	time.Sleep(300 * time.Millisecond) // past the move lease
	if r, _ := s.take(ctx, tenant, 10); len(r.Jobs) != 0 {
		t.Errorf("take after the lease = %+v, want the cancelled job not taken again", r)
	}
	again := env
	again.EnqueuedAt = env.EnqueuedAt.Add(time.Second)
	if err := p.Enqueue(ctx, []queue.Envelope{again}); err != nil {
		t.Fatal(err)
	}
	if n := rdb.LLen(ctx, keys.Queue(tenant)).Val(); n != 1 {
		t.Errorf("a new job under the cancelled id: %d on the queue, want 1", n)
	}
	if rec, err := jobstate.Get(ctx, rdb, tenant, "x"); err != nil || rec.State != jobstate.Queued {
		t.Errorf("state of the new job under the id %q (%v), want queued", rec.State, err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Queue(tenant), keys.Backlog(tenant)) })
}

// TestUnconfiguredHintsDoNotHide: due hint entries of tenants not
// configured here (deleted tenants that kept scheduled jobs, or another
// drainer's on the same Redis) are read past in pages, so more of them than
// one page holds (maxDueTenants) never hide a configured tenant's due jobs;
// their entries and jobs stay for whoever has them.
func TestUnconfiguredHintsDoNotHide(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	past := time.Now().Add(-time.Hour)
	for i := range maxDueTenants + 5 {
		gone := fmt.Sprintf("gone%04d", i)
		if err := Add(ctx, rdb, gone, []Job{job(gone, "g", past)}, 10); err != nil {
			t.Fatal(err)
		}
	}
	live := "live"
	if err := Add(ctx, rdb, live, []Job{job(live, "l", time.Now())}, 10); err != nil {
		t.Fatal(err)
	}
	prod := &recorder{}
	s, err := New(Config{Redis: rdb, Producer: prod, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := runFor(s, live)
	testenv.WaitFor(t, 5*time.Second, "the configured tenant's job moved", func() bool {
		prod.mu.Lock()
		defer prod.mu.Unlock()
		return len(prod.jobs) == 1
	})
	stop()
	if n := rdb.ZCard(ctx, keys.ScheduledTenants()).Val(); n < maxDueTenants+5 {
		t.Errorf("%d hint entries left, want the %d of the other tenants kept", n, maxDueTenants+5)
	}
	if n := rdb.HLen(ctx, keys.ScheduledJobs("gone0000")).Val(); n != 1 {
		t.Errorf("an unconfigured tenant's stored jobs: %d, want 1 kept", n)
	}
}
