package kafkaq_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// TestKafkaCopiesOfOneJob: two records of one envelope (the same id and
// enqueued_at, as a produce sent again after an unknown outcome leaves) are
// claimed as one job and a duplicate while the first is held; after the
// first is done, a third copy is claimed as a duplicate from the state
// (job_cancelled.lua's done_ms). Each duplicate's finish lowers the backlog
// and leaves the state done. Another enqueued_at under the id is a new job.
func TestKafkaCopiesOfOneJob(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	tenant := testenv.Name(t, "kdup")
	ctx := context.Background()
	env := queue.Envelope{ID: "c1", Tenant: tenant, Type: "t", Cost: 1, Payload: []byte(`{}`),
		EnqueuedAt: time.Now().UTC().Truncate(time.Millisecond)}
	for range 2 {
		if err := e.produce.Enqueue(ctx, []queue.Envelope{env}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := e.consumer(e.consumerConfig(), nil)
	got := claimN(t, c, tenant, 2, 20*time.Second)
	if got[0].Duplicate || !got[1].Duplicate {
		t.Fatalf("two copies claimed at once: Duplicate %v, %v; want false, true", got[0].Duplicate, got[1].Duplicate)
	}
	if err := c.Finish(ctx, got[1], queue.Outcome{Duplicate: true}); err != nil {
		t.Fatal(err)
	}
	finish(t, c, got[0], nil)
	if rec, err := jobstate.Get(ctx, e.rdb, tenant, "c1"); err != nil || rec.State != jobstate.Done {
		t.Fatalf("c1 after its delivery: %+v, %v; want done", rec, err)
	}

	if err := e.produce.Enqueue(ctx, []queue.Envelope{env}); err != nil {
		t.Fatal(err)
	}
	third := claimN(t, c, tenant, 1, 20*time.Second)[0]
	if !third.Duplicate {
		t.Errorf("a copy of the done job: Duplicate false, want true")
	}
	if err := c.Finish(ctx, third, queue.Outcome{Duplicate: true}); err != nil {
		t.Fatal(err)
	}
	later := env
	later.EnqueuedAt = env.EnqueuedAt.Add(time.Second)
	if err := e.produce.Enqueue(ctx, []queue.Envelope{later}); err != nil {
		t.Fatal(err)
	}
	if j := claimN(t, c, tenant, 1, 20*time.Second)[0]; j.Duplicate {
		t.Errorf("a new job under the id (another enqueued_at): Duplicate true, want false")
	} else {
		finish(t, c, j, nil)
	}
	testenv.WaitFor(t, 5*time.Second, "backlog 0", func() bool {
		n, _ := e.rdb.Get(ctx, keys.Backlog(tenant)).Int64()
		return n == 0
	})
}
