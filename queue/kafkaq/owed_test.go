package kafkaq

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
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
		job := c.newClaimed(ctx, &entry{raw: raw}, tenant)
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
