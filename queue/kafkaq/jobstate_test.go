package kafkaq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// TestKafkaJobStates follows job states on the Kafka backend: the producer
// records each job as queued with its seq once Kafka acknowledged it; a
// real consumer and drainer then record done, dead (with the DLQ counter),
// retrying then done, and drop a job cancelled while queued without
// delivering it.
func TestKafkaJobStates(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 2)
	ctx := context.Background()
	tenant := testenv.Name(t, "kjs")
	e.enqueue(tenant, 0, 4)
	ids := []string{jobID(tenant, 0), jobID(tenant, 1), jobID(tenant, 2), jobID(tenant, 3)}
	for i, id := range ids {
		r, err := jobstate.Get(ctx, e.rdb, tenant, id)
		if err != nil {
			t.Fatalf("Get(%s) after the ack: %v", id, err)
		}
		if r.State != jobstate.Queued || r.Seq != int64(i+1) || r.Ahead != int64(i) || r.Type != "t" {
			t.Errorf("%s after the ack: state %s seq %d ahead %d type %q, want queued %d %d t", id, r.State, r.Seq, r.Ahead, r.Type, i+1, i)
		}
	}
	if err := jobstate.Cancel(ctx, e.rdb, tenant, ids[2]); err != nil {
		t.Fatalf("Cancel(%s) = %v", ids[2], err)
	}

	c, _ := e.consumer(e.consumerConfig(), nil)
	dl := newDeliveries()
	var mu sync.Mutex
	tries := map[string]int{}
	h := drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		dl.add(job.ID)
		mu.Lock()
		tries[job.ID]++
		n := tries[job.ID]
		mu.Unlock()
		switch {
		case job.ID == ids[1]:
			return drainer.Permanent(errors.New("410 gone"))
		case job.ID == ids[3] && n == 1:
			return errors.New("timeout")
		}
		return nil
	})
	runDrainer(t, c, e.rdb, map[string]config.Tenant{tenant: {}}, h)
	testenv.WaitFor(t, 20*time.Second, "backlog 0", func() bool {
		n, err := e.rdb.Get(ctx, keys.Backlog(tenant)).Int()
		return err == nil && n == 0
	})

	type rec struct {
		State, LastError, Reason string
		Attempt                  int
	}
	want := map[string]rec{
		ids[0]: {State: "done", Attempt: 1},
		ids[1]: {State: "dead", LastError: "drainer: permanent failure: 410 gone", Reason: "rejected", Attempt: 1},
		ids[2]: {State: "cancelled"},
		ids[3]: {State: "done", LastError: "timeout", Attempt: 2},
	}
	got := map[string]rec{}
	for _, id := range ids {
		r, err := jobstate.Get(ctx, e.rdb, tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		got[id] = rec{State: r.State, LastError: r.LastError, Reason: r.Reason, Attempt: r.Attempt}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("job states on Kafka (-want +got):\n%s", diff)
	}
	if unique, _ := dl.counts(); unique != 3 {
		t.Errorf("%d jobs delivered, want 3 (not the cancelled one)", unique)
	}
	if n := e.rdb.ZCard(ctx, keys.JobIndex(tenant, "dead")).Val(); n != 1 {
		t.Errorf("dead index = %d jobs, want 1", n)
	}
	if n := e.rdb.ZCard(ctx, keys.Delivering(tenant)).Val(); n != 0 {
		t.Errorf("deliveries in progress = %d, want 0", n)
	}
	if n, _ := e.rdb.Get(ctx, keys.JobsDispatched(tenant)).Int(); n != 4 {
		t.Errorf("dispatched sequence = %d, want 4", n)
	}
}
