package kafkaq_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
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

// TestKafkaCopyBeforePostAckWrite: on Kafka the producer records a job's
// enqueued_at after the broker's ack, so a drainer may deliver and finish a
// copy before that write lands, and read the next copy before it lands
// too (the unknown outcome's first produce appended late, the client's
// retry's write not yet in Redis). The state then holds done without the
// producer's enqueued_at; the next copy of the same envelope is still
// recognised as a duplicate, by Take and by Claim, and a new job under the
// id (another enqueued_at) is not.
func TestKafkaCopyBeforePostAckWrite(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	ctx := context.Background()
	// A producer without Redis: no post-ack write at all, the widest form
	// of "not landed yet".
	p, err := kafkaq.NewProducer(ctx, kafkaq.ProducerConfig{Kafka: e.cfg, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	tenant := testenv.Name(t, "kpre")
	env := queue.Envelope{ID: "c1", Tenant: tenant, Type: "t", Cost: 1, Payload: []byte(`{}`),
		EnqueuedAt: time.Now().UTC().Truncate(time.Millisecond)}
	produce := func(env queue.Envelope) {
		t.Helper()
		if err := p.Enqueue(ctx, []queue.Envelope{env}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := e.consumer(e.consumerConfig(), nil)
	take := func() *queue.Claimed {
		t.Helper()
		return takeN(t, c, tenant, 1, 8, 20*time.Second)[0]
	}

	produce(env)
	first := take()
	if first.Duplicate || first.Started == 0 {
		t.Fatalf("first copy: Duplicate %v, Started %d; want a started delivery", first.Duplicate, first.Started)
	}
	finish(t, c, first, nil)
	if rec, err := jobstate.Get(ctx, e.rdb, tenant, "c1"); err != nil || rec.State != jobstate.Done {
		t.Fatalf("c1 after its delivery: %+v, %v; want done", rec, err)
	}

	produce(env)
	if j := take(); !j.Duplicate || j.Started != 0 {
		t.Errorf("Take of a copy of the done job before the post-ack write: Duplicate %v, Started %d; want a duplicate, unstarted", j.Duplicate, j.Started)
		finish(t, c, j, nil)
	} else if err := c.Finish(ctx, j, queue.Outcome{Duplicate: true}); err != nil {
		t.Fatal(err)
	}
	produce(env)
	if j := claimN(t, c, tenant, 1, 20*time.Second)[0]; !j.Duplicate {
		t.Errorf("Claim of a copy of the done job before the post-ack write: Duplicate false, want true")
		finish(t, c, j, nil)
	} else if err := c.Finish(ctx, j, queue.Outcome{Duplicate: true}); err != nil {
		t.Fatal(err)
	}

	later := env
	later.EnqueuedAt = env.EnqueuedAt.Add(time.Second)
	produce(later)
	if j := take(); j.Duplicate || j.Started == 0 {
		t.Errorf("a new job under the id (another enqueued_at): Duplicate %v, Started %d; want a started delivery", j.Duplicate, j.Started)
	} else {
		finish(t, c, j, nil)
	}
}
