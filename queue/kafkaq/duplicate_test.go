package kafkaq_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

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

// produceCopy writes env to partition part of e's topic as the producer
// writes it, without the producer's post-ack write: a copy from a produce
// whose outcome was unknown, landed in the partition the tenant had before
// the topic gained partitions.
func produceCopy(t testing.TB, e *kafkaEnv, part int, env queue.Envelope) {
	t.Helper()
	env.Version = queue.EnvelopeVersion
	b, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fresh := &kafka.Client{Addr: kafka.TCP(e.cfg.Brokers...), Transport: &kafka.Transport{}}
	res, err := fresh.Produce(ctx, &kafka.ProduceRequest{Topic: e.cfg.Topic, Partition: part, RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(kafka.Record{Key: kafka.NewBytes([]byte(env.Tenant)), Value: kafka.NewBytes(b),
			Headers: []kafka.Header{{Key: kafkaq.HeaderTenant, Value: []byte(env.Tenant)}, {Key: kafkaq.HeaderJobID, Value: []byte(env.ID)}}})})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		t.Fatalf("produce %s to partition %d: %v", env.ID, part, err)
	}
}

// oneStarted checks that of two copies of one job exactly one was started
// and the other is a duplicate, unstarted, and returns them in that order.
func oneStarted(t testing.TB, what string, a, b *queue.Claimed) (started, dup *queue.Claimed) {
	t.Helper()
	if b.Started > 0 {
		a, b = b, a
	}
	if a.Started != 1 || a.Duplicate || b.Started != 0 || !b.Duplicate {
		t.Fatalf("%s: Started %d and %d, Duplicate %v and %v; want one started (attempt 1), one a duplicate",
			what, a.Started, b.Started, a.Duplicate, b.Duplicate)
	}
	return a, b
}

// TestKafkaCopiesInTwoPartitionsOneConsumer: two copies of one envelope in
// two partitions (the topic gained partitions between a produce whose
// outcome was unknown and its retry) claimed by one consumer are one job
// and a duplicate, by Claim (held in memory across partitions) and by Take,
// and the job ends done once.
func TestKafkaCopiesInTwoPartitionsOneConsumer(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 2)
	ctx := context.Background()
	tenant := testenv.Name(t, "kparts")
	env := queue.Envelope{ID: "c1", Tenant: tenant, Type: "t", Cost: 1, Payload: []byte(`{}`),
		EnqueuedAt: time.Now().UTC().Truncate(time.Millisecond)}
	produceCopy(t, e, 0, env)
	produceCopy(t, e, 1, env)
	c, _ := e.consumer(e.consumerConfig(), nil)
	got := claimN(t, c, tenant, 2, 20*time.Second)
	if got[0].Source == got[1].Source || got[0].Duplicate == got[1].Duplicate {
		t.Fatalf("Claim of the copies: Source %q and %q, Duplicate %v and %v; want two partitions, one duplicate",
			got[0].Source, got[1].Source, got[0].Duplicate, got[1].Duplicate)
	}
	for _, j := range got {
		if j.Duplicate {
			if err := c.Finish(ctx, j, queue.Outcome{Duplicate: true}); err != nil {
				t.Fatal(err)
			}
		} else {
			finish(t, c, j, nil)
		}
	}

	env.ID = "c2"
	produceCopy(t, e, 0, env)
	produceCopy(t, e, 1, env)
	taken := takeN(t, c, tenant, 2, 8, 20*time.Second)
	started, dup := oneStarted(t, "Take of the copies", taken[0], taken[1])
	if err := c.Finish(ctx, dup, queue.Outcome{Duplicate: true}); err != nil {
		t.Fatal(err)
	}
	finish(t, c, started, nil)
	// Claim records no start (the drainer does), so c1 has no attempt.
	for id, attempt := range map[string]int{"c1": 0, "c2": 1} {
		if rec, err := jobstate.Get(ctx, e.rdb, tenant, id); err != nil || rec.State != jobstate.Done || rec.Attempt != attempt {
			t.Errorf("%s after its delivery: %+v, %v; want done, attempt %d", id, rec, err, attempt)
		}
	}
}

// TestKafkaCopiesInTwoPartitionsTwoDrainers: two copies of one envelope in
// two partitions owned by two consumers of one group: the first take
// starts the delivery (recording its partition, start_part), the other
// finds it under way from another partition and settles its copy as a
// duplicate, unsent; the job ends done with attempt 1. Before start_part
// both copies were delivered.
func TestKafkaCopiesInTwoPartitionsTwoDrainers(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 2)
	ctx := context.Background()
	tenant := testenv.Name(t, "kparts2")
	a, _ := e.consumer(e.consumerConfig(), nil)
	b, _ := e.consumer(e.consumerConfig(), nil)
	testenv.WaitFor(t, 60*time.Second, "the group stable with both consumers", func() bool {
		members, state := e.groupMembers()
		return state == "Stable" && len(members) == 2
	})
	env := queue.Envelope{ID: "c1", Tenant: tenant, Type: "t", Cost: 1, Payload: []byte(`{}`),
		EnqueuedAt: time.Now().UTC().Truncate(time.Millisecond)}
	produceCopy(t, e, 0, env)
	produceCopy(t, e, 1, env)

	type took struct {
		c   *kafkaq.Consumer
		job *queue.Claimed
	}
	out := make(chan took, 2)
	for _, c := range []*kafkaq.Consumer{a, b} {
		go func() {
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
				if jobs, _, err := c.Take(ctx, tenant, 8); err == nil && len(jobs) > 0 {
					out <- took{c, jobs[0]}
					return
				}
			}
			out <- took{c, nil}
		}()
	}
	x, y := <-out, <-out
	if x.job == nil || y.job == nil || x.c == y.c {
		t.Fatalf("each consumer takes one copy: got %v and %v", x.job, y.job)
	}
	if x.job.Source == y.job.Source {
		t.Fatalf("both copies from partition %s, want one from each", x.job.Source)
	}
	started, dup := oneStarted(t, "Take of the copies by two consumers", x.job, y.job)
	owner := map[*queue.Claimed]*kafkaq.Consumer{x.job: x.c, y.job: y.c}
	if err := owner[dup].Finish(ctx, dup, queue.Outcome{Duplicate: true}); err != nil {
		t.Fatal(err)
	}
	finish(t, owner[started], started, nil)
	if rec, err := jobstate.Get(ctx, e.rdb, tenant, "c1"); err != nil || rec.State != jobstate.Done || rec.Attempt != 1 {
		t.Errorf("c1 after its delivery: %+v, %v; want done, attempt 1", rec, err)
	}
}
