package dlq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// killJob submits id on the Redis backend and finishes it dead.
func killJob(t *testing.T, rdb *redis.Client, p queue.Producer, tenant, id string) {
	t.Helper()
	ctx := context.Background()
	env := queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now(), Payload: []byte(`{}`)}
	if err := p.Enqueue(ctx, []queue.Envelope{env}); err != nil {
		t.Fatal(err)
	}
	c, err := redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := c.Claim(ctx, tenant)
	if err != nil || j == nil {
		t.Fatalf("claim %s: %v %v", id, j, err)
	}
	if err := c.Finish(ctx, j, queue.Outcome{Dead: &queue.DeadLetter{Reason: "rejected", Error: "422", At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
}

// TestRedriveRepeatsAndInterrupted: an id given twice is redriven once;
// an interrupted redrive (the enqueue done, its removal not) leaves the job
// queued and still listed in the DLQ with its letter, as ADR 0014 says.
func TestRedriveRepeatsAndInterrupted(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	tenant := testenv.Name(t, "rr")
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	st, err := dlq.New(dlq.Config{Redis: rdb, Producer: p})
	if err != nil {
		t.Fatal(err)
	}
	killJob(t, rdb, p, tenant, "x")
	res, err := st.Redrive(ctx, tenant, []string{"x", "x"})
	if err != nil || res.Redriven != 1 || rdb.LLen(ctx, keys.Queue(tenant)).Val() != 1 {
		t.Errorf("redrive [x x] = %+v, %v with %d queued; want 1 redriven, 1 queued", res, err, rdb.LLen(ctx, keys.Queue(tenant)).Val())
	}
	rdb.Del(ctx, keys.Queue(tenant)) // x leaves, so that y is the job killJob claims
	killJob(t, rdb, p, tenant, "y")
	// The redrive's enqueue of y, without its removal.
	env := queue.Envelope{Version: queue.EnvelopeVersion, ID: "y", Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now()}
	if err := p.Enqueue(ctx, []queue.Envelope{env}); err != nil {
		t.Fatal(err)
	}
	page, err := st.List(ctx, tenant, 10, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].JobID != "y" {
		t.Errorf("DLQ after an interrupted redrive of y = %+v, %v; want y listed", page, err)
	}
	if !rdb.HExists(ctx, keys.DeadRecords(tenant), "y").Val() {
		t.Error("y's dead letter is gone")
	}
}
