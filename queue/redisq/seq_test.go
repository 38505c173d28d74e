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

// TestTakeRaisesDispatchedOnly: a take sets the tenant's dispatched
// sequence to the highest seq it started, and never lowers it (a job
// started after newer ones, as a retry is: take.lua's raise_seq).
func TestTakeRaisesDispatchedOnly(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "seq")
	prod, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	take := func(want int) {
		t.Helper()
		jobs, _, err := cons.Take(ctx, tenant, 4)
		if err != nil || len(jobs) != want {
			t.Fatalf("take: %d jobs, %v; want %d", len(jobs), err, want)
		}
	}
	for _, id := range []string{"a", "b"} {
		if err := prod.Enqueue(ctx, []queue.Envelope{{ID: id, Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now().UTC()}}); err != nil {
			t.Fatal(err)
		}
	}
	take(2)
	if got := rdb.Get(ctx, keys.JobsDispatched(tenant)).Val(); got != "2" {
		t.Fatalf("dispatched %q after taking seq 1 and 2, want 2", got)
	}
	// A job whose seq is behind the dispatched one (set ahead here, as newer
	// jobs started before a retry would have raised it).
	if err := prod.Enqueue(ctx, []queue.Envelope{{ID: "c", Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now().UTC()}}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, keys.JobsDispatched(tenant), 10, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	take(1)
	if got := rdb.Get(ctx, keys.JobsDispatched(tenant)).Val(); got != "10" {
		t.Errorf("dispatched %q after taking a job behind it, want 10 kept", got)
	}
	if ttl := rdb.PTTL(ctx, keys.JobsDispatched(tenant)).Val(); ttl <= 0 {
		t.Errorf("dispatched sequence TTL %v, want one", ttl)
	}
}
