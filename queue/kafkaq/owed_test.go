package kafkaq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue"
)

// TestFinishBeforePostAckWrite: Kafka hands a record out at its ack, so a
// drainer can finish a job before the producer's post-ack write has counted
// it. Whichever comes first, the tenant's backlog counter ends at what it
// was before the job (0 here, where a finish alone clamps), and no debt is
// left (keys.BacklogOwed). Before the owed count, the finish-first order
// left the counter high by the job's cost for good, and max_backlog
// refused jobs it should admit.
func TestFinishBeforePostAckWrite(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	c, k := redisSides(t, rdb, "owed")
	for _, finishFirst := range []bool{true, false} {
		tenant := testenv.Name(t, "owed")
		bk := keys.Backlog(tenant)
		env := queue.Envelope{Version: queue.EnvelopeVersion, ID: "j", Tenant: tenant, Type: "t", Cost: 3, EnqueuedAt: time.Now()}
		raw, err := env.Encode()
		if err != nil {
			t.Fatal(err)
		}
		write := func() {
			if failed := k.write(oneJob(env), true); len(failed.cost) != 0 || failed.jobs != 0 {
				t.Fatalf("post-ack write failed: %+v", failed)
			}
		}
		if !finishFirst {
			write()
			if n, _ := rdb.Get(ctx, bk).Int64(); n != 3 {
				t.Errorf("counter %d after the post-ack write, want 3", n)
			}
		}
		job := c.newClaimed(ctx, testEntry(raw), tenant)
		c.lowerBacklog(ctx, job, queue.Outcome{})
		if finishFirst {
			if n, _ := rdb.Get(ctx, keys.BacklogOwed(tenant)).Int64(); n != 3 {
				t.Errorf("owed %d after a finish before the write, want 3", n)
			}
			write()
		}
		n, err := rdb.Get(ctx, bk).Int64()
		if err != nil || n != 0 {
			t.Errorf("finish first %v: counter %d, %v; want 0", finishFirst, n, err)
		}
		if rdb.Exists(ctx, keys.BacklogOwed(tenant)).Val() != 0 {
			t.Errorf("finish first %v: a debt is left", finishFirst)
		}
		rdb.Del(ctx, bk, keys.JobState(tenant, "j"), keys.JobIndex(tenant, "done"), keys.JobIndex(tenant, "queued"))
	}
}

// TestPostAckParts: the post-ack write makes one script call per tenant
// (its raise with its first stateChunk states), one more per further chunk
// without a raise, a call of its own for a raise held without states, and
// none for a tenant with neither.
func TestPostAckParts(t *testing.T) {
	c := newCounts()
	for i := range stateChunk + 1 {
		c.addJob("big", 1, &jobstate.QueuedJob{ID: fmt.Sprint(i)})
	}
	c.addJob("bare", 3, nil)
	c.addJob("none", 0, nil)
	var got []string
	for _, p := range postAckParts(c) {
		got = append(got, fmt.Sprintf("%s raise %d, %d jobs", p.tenant, p.raise, len(p.jobs)))
	}
	want := []string{
		fmt.Sprintf("big raise %d, %d jobs", stateChunk+1, stateChunk),
		"big raise 0, 1 jobs",
		"bare raise 3, 0 jobs",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("post-ack calls (-want +got):\n%s", d)
	}
}

// TestHeldCostStopsAtMaxCost: a tenant's summed cost never wraps; it stops
// at limits.MaxCost, the most the post-ack script takes exactly.
func TestHeldCostStopsAtMaxCost(t *testing.T) {
	c := newCounts()
	c.addJob("t", limits.MaxCost, nil)
	c.addJob("t", limits.MaxCost, nil)
	c.addJob("t", 1, nil)
	if got := c.cost["t"]; got != limits.MaxCost {
		t.Errorf("summed cost %d, want %d", got, limits.MaxCost)
	}
	c.addJob("u", 2, nil)
	c.addJob("u", 3, nil)
	if got := c.cost["u"]; got != 5 {
		t.Errorf("summed cost %d, want 5", got)
	}
}
