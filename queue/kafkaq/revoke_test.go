package kafkaq_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
)

// TestRevokeAwaitsSlowDeliveries: a second drainer joining while the
// first is in the middle of deliveries slower than the old fixed 2–5 s
// revoke wait, and slower than the group's session timeout, does not start
// any of them again: the first waits for them (RevokeTimeout = the delivery
// timeout + 1s or so, as internal/boot sets it), heartbeating meanwhile so
// the group does not expire it, before it commits and lets the partitions
// go.
func TestRevokeAwaitsSlowDeliveries(t *testing.T) {
	t.Parallel()
	const slow = 7 * time.Second // longer than the test consumers' 6-s session
	e := newKafkaEnv(t, 2)
	tenants := map[string]config.Tenant{}
	for _, name := range []string{"ra", "rb"} {
		tn := testenv.Name(t, name)
		tenants[tn] = config.Tenant{}
		e.enqueue(tn, 0, 6)
	}
	var mu sync.Mutex
	starts, running := map[string]int{}, map[string]int{}
	overlap := 0
	h := drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		mu.Lock()
		starts[job.ID]++
		if running[job.ID] > 0 {
			overlap++
		}
		running[job.ID]++
		mu.Unlock()
		time.Sleep(slow)
		mu.Lock()
		running[job.ID]--
		mu.Unlock()
		return nil
	})
	cfg := e.consumerConfig()
	cfg.RevokeTimeout = slow + 2*time.Second
	c1, _ := e.consumer(cfg, nil)
	runDrainer(t, c1, e.rdb, tenants, h)
	testenv.WaitFor(t, 20*time.Second, "deliveries in flight on the first drainer", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) > 0
	})
	c2, _ := e.consumer(cfg, nil)
	runDrainer(t, c2, e.rdb, tenants, h)
	testenv.WaitFor(t, 60*time.Second, "every job delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) == 12
	})
	time.Sleep(slow + time.Second) // a second start would show by now
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, n := range starts {
		again += n - 1
	}
	if again != 0 || overlap != 0 {
		t.Errorf("%d deliveries started again (%d while the first still ran), want 0", again, overlap)
	}
}

// TestHoldsEndsWithTheRevoke: a claimed job is its consumer's to deliver
// (Holds) until a rebalance starts letting its partition go; from then on
// Holds is false, so a drainer does not start a job that waited for a
// concurrency slot or a turn across the revoke (after revoke_timeout the
// next owner delivers it: a probe saw one job started by both drainers).
func TestHoldsEndsWithTheRevoke(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	tn := testenv.Name(t, "holds")
	e.enqueue(tn, 0, 2)
	cfg := e.consumerConfig()
	c1, _ := e.consumer(cfg, nil)
	jobs := claimN(t, c1, tn, 1, 20*time.Second)
	if !c1.Holds(jobs[0]) {
		t.Fatal("Holds = false for a job just claimed, want true")
	}
	e.consumer(cfg, nil) // a second member: the group rebalances
	testenv.WaitFor(t, 20*time.Second, "the claimed job no longer held once the revoke starts", func() bool {
		return !c1.Holds(jobs[0])
	})
}
