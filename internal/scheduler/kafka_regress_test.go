package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/scheduler"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// postAck is a Producer that records what the Kafka producer records after
// the broker's ack (job_state_enqueue.lua and the backlog), without a
// broker: what the scheduler's move sees on the Kafka backend.
type postAck struct{ rdb redis.UniversalClient }

func (k postAck) Enqueue(ctx context.Context, jobs []queue.Envelope) error {
	qj := make([]jobstate.QueuedJob, 0, len(jobs))
	for _, j := range jobs {
		qj = append(qj, jobstate.QueuedJob{ID: j.ID, Type: j.Type, EnqueuedAt: j.EnqueuedAt, Cost: j.Cost})
		k.rdb.IncrBy(ctx, keys.Backlog(j.Tenant), j.Cost)
	}
	return jobstate.EnqueueCall(jobs[0].Tenant, 0, qj).Run(ctx, k.rdb).Err()
}

func (k postAck) Close() error { return nil }

// TestMovedJobListedOnKafka: on the Kafka backend a scheduled job the
// scheduler moves becomes queued and joins the queued index, so the list
// shows it and a purge cancels it.
func TestMovedJobListedOnKafka(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	tn := testenv.Name(t, "mk")
	due := time.Now().Add(200 * time.Millisecond)
	env := queue.Envelope{Version: queue.EnvelopeVersion, ID: "s1", Tenant: tn, Type: "r", Cost: 1, EnqueuedAt: time.Now(), NotBefore: &due}
	if err := scheduler.Add(ctx, rdb, tn, []scheduler.Job{{Due: due, Envelope: env}}, 100); err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Config{Redis: rdb, Producer: postAck{rdb}})
	if err != nil {
		t.Fatal(err)
	}
	rc, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(rc, func() []string { return []string{tn} }, func(string) { stop() })
	}()
	<-done
	if r, err := jobstate.Get(ctx, rdb, tn, "s1"); err != nil || r.State != jobstate.Queued {
		t.Fatalf("moved job: %+v, %v; want queued", r, err)
	}
	page, err := jobstate.List(ctx, rdb, tn, jobstate.Queued, nil, 10)
	if err != nil || len(page.Jobs) != 1 {
		t.Errorf("queued list after the move = %+v, %v; want s1", page, err)
	}
	if n, err := jobstate.Purge(ctx, rdb, tn); err != nil || n != 1 {
		t.Errorf("purge after the move = %d, %v; want 1", n, err)
	}
}
