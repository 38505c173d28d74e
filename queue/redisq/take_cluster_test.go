package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
)

// TestTakeOnCluster: take.lua (with and without the bucket), the finish and
// Untake run on a Redis Cluster (testenv.Cluster): every key a call builds
// (the popped jobs' state hashes, the job indexes) is in the tenant's slot,
// so no call is refused with CROSSSLOT or MOVED.
func TestTakeOnCluster(t *testing.T) {
	t.Parallel()
	rdb := testenv.Cluster(t)
	ctx := context.Background()
	prod, cons := takeParts(t, rdb)
	tenant := testenv.Name(t, "ctake")
	var envs []queue.Envelope
	for _, id := range []string{"a", "b", "c", "d"} {
		envs = append(envs, queue.Envelope{ID: id, Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now().UTC()})
	}
	if err := prod.Enqueue(ctx, envs); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := cons.Take(ctx, tenant, 2)
	if err != nil || len(jobs) != 2 || jobs[0].Started != 1 {
		t.Fatalf("take on a cluster: %v started %v, %v", ids(jobs), started(jobs), err)
	}
	if err := cons.Finish(ctx, jobs[0], queue.Outcome{}); err != nil {
		t.Fatalf("finish on a cluster: %v", err)
	}
	if err := cons.Untake(ctx, jobs[1]); err != nil {
		t.Fatalf("untake on a cluster: %v", err)
	}
	turned, turn, _, err := cons.TakeTurn(ctx, tenant, 1, 100, 10, 0)
	if err != nil || len(turned) != 1 || turned[0].Started != 1 || turn.Rate != 100 {
		t.Fatalf("take with the turn on a cluster: %v %+v, %v", ids(turned), turn, err)
	}
	if err := cons.Finish(ctx, turned[0], queue.Outcome{}); err != nil {
		t.Fatal(err)
	}
}
