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

// TestKafkaPurge: a purge marks the jobs the consumer holds (in its FIFO,
// and a retry waiting in memory), so every claim of them reads cancelled,
// the retry's included; finishing them as dropped leaves the backlog the
// purge set to 0, and a job queued after the purge stays counted in it.
func TestKafkaPurge(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	ctx := context.Background()
	tenant := testenv.Name(t, "kpg")
	e.enqueue(tenant, 0, 3)
	cfg := e.consumerConfig()
	cfg.Tenants, cfg.ClaimWait = []string{tenant}, 100*time.Millisecond
	c, _ := e.consumer(cfg, nil)
	claim := func() *queue.Claimed {
		t.Helper()
		var j *queue.Claimed
		testenv.WaitFor(t, 20*time.Second, "a claim", func() bool {
			var err error
			j, _, err = c.Claim(ctx, tenant)
			return err == nil && j != nil
		})
		return j
	}
	first := claim()
	if first.Cancelled {
		t.Fatal("first claim cancelled before the purge")
	}
	next := first.Envelope
	next.Attempt++
	if err := c.Defer(ctx, first, queue.Retry{Delay: 200 * time.Millisecond, Next: next, LastError: "500"}); err != nil {
		t.Fatal(err)
	}
	if n, err := jobstate.Purge(ctx, e.rdb, tenant); err != nil || n != 3 {
		t.Fatalf("Purge = %d, %v; want 3 (two queued, one retrying)", n, err)
	}
	e.enqueue(tenant, 3, 4)
	seen := map[string]bool{}
	after := jobID(tenant, 3)
	for range 4 {
		j := claim()
		id := j.Envelope.ID
		seen[id] = true
		if j.Cancelled != (id != after) {
			t.Errorf("claim of %s after the purge: cancelled %v, want %v", id, j.Cancelled, id != after)
		}
		if id == after {
			continue
		}
		if err := c.Finish(ctx, j, queue.Outcome{Dropped: jobstate.Cancelled}); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 4 {
		t.Errorf("claimed %v, want the 3 purged jobs (the retry from memory included) and the one queued after", seen)
	}
	if n, _ := e.rdb.Get(ctx, keys.Backlog(tenant)).Int(); n != 1 {
		t.Errorf("backlog %d after the purged jobs were dropped, want 1 (the job queued after the purge)", n)
	}
}
