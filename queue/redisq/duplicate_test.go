package redisq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// TestRedisDoneCopySkipped: an enqueue of the same envelope again (the same
// id and enqueued_at) adds nothing; a delivery that succeeded after its
// lease was reaped still records done (the backlog is not lowered then), and
// the copy the reaper returned is claimed as a duplicate, whose finish
// lowers the backlog once and leaves the state done.
func TestRedisDoneCopySkipped(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "dupr")
	p, _ := newTestRedisProducer(t, rdb, time.Unix(1_700_000_000, 0))
	job := queuetest.Job(tenant, "a", 2)
	for range 2 {
		if err := p.Enqueue(ctx, []queue.Envelope{job}); err != nil {
			t.Fatal(err)
		}
	}
	if q, n := consQueued(t, rdb, tenant), consBacklog(t, rdb, tenant); len(q) != 1 || n != 2 {
		t.Fatalf("after two enqueues of one envelope: queue %v, backlog %d; want [a], 2", q, n)
	}

	c := newTestConsumer(t, ConsumerConfig{Redis: rdb, Lease: time.Second})
	first := consClaim(t, c, tenant, consMS0)
	if first.Duplicate {
		t.Fatal("the first claim is a duplicate")
	}
	if n, err := c.reapAt(ctx, tenant, consMS0+1500); err != nil || n != 1 {
		t.Fatalf("reap = %d, %v; want 1", n, err)
	}
	if err := c.Finish(ctx, first, queue.Outcome{}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("finish after the reap = %v, want ErrLeaseLost", err)
	}
	if rec, err := jobstate.Get(ctx, rdb, tenant, "a"); err != nil || rec.State != jobstate.Done {
		t.Errorf("state after a delivered job's lost lease: %+v, %v; want done", rec, err)
	}
	if n := consBacklog(t, rdb, tenant); n != 2 {
		t.Errorf("backlog after the lost lease = %d, want 2 (the copy lowers it)", n)
	}
	again := consClaim(t, c, tenant, consMS0+1600)
	if !again.Duplicate {
		t.Fatalf("the reaped copy of a done job: Duplicate false, want true")
	}
	if err := c.Finish(ctx, again, queue.Outcome{Duplicate: true}); err != nil {
		t.Fatal(err)
	}
	if n := consBacklog(t, rdb, tenant); n != 0 {
		t.Errorf("backlog after the duplicate's finish = %d, want 0", n)
	}
	if rec, err := jobstate.Get(ctx, rdb, tenant, "a"); err != nil || rec.State != jobstate.Done || rec.Attempt != 0 {
		t.Errorf("state after the duplicate: %+v, %v; want done, left as it was", rec, err)
	}
}
