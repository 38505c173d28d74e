package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// TestEnqueueRefreshesShortTTL: an enqueue sets the queue's, the backlog's
// and the queued index's TTL back to the full one when it is short by more
// than 1 % of it (enqueue_jobs.lua's refresh_ttl), and a TTL within that
// margin is left as it is (a read, not a write, on a busy tenant).
func TestEnqueueRefreshesShortTTL(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "ttl")
	prod, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(id string) {
		t.Helper()
		if err := prod.Enqueue(ctx, []queue.Envelope{{ID: id, Tenant: tenant, Type: "t", Cost: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	ttls := map[string]time.Duration{
		keys.Queue(tenant):              keys.QueueTTL,
		keys.Backlog(tenant):            keys.BacklogTTL,
		keys.JobIndex(tenant, "queued"): keys.JobStateTTL,
	}
	enqueue("a")
	for k := range ttls {
		if err := rdb.PExpire(ctx, k, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("b")
	for k, full := range ttls {
		if left := rdb.PTTL(ctx, k).Val(); left < full-time.Minute || left > full {
			t.Errorf("%s: TTL %v after an enqueue on a short one, want within a minute of %v", k, left, full)
		}
	}
	near := keys.QueueTTL - 30*time.Second
	if err := rdb.PExpire(ctx, keys.Queue(tenant), near).Err(); err != nil {
		t.Fatal(err)
	}
	enqueue("c")
	if left := rdb.PTTL(ctx, keys.Queue(tenant)).Val(); left > near {
		t.Errorf("queue TTL %v after an enqueue on one 30 s short, want it left (<= %v)", left, near)
	}
}
