// Package queuetest is the conformance suite of sluice's queue backends (as
// river's riverdrivertest is of its drivers): Run runs the same claim,
// defer, release, finish, extend, lease-lost, redelivery and cancel cases on
// a backend against the real servers. Each backend's own tests call it and
// keep for themselves only what is specific to the backend (Kafka
// rebalances and the offset window, the Redis reaper).
package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// Backend is one backend under test, built fresh for each case, for the
// tenants the case names (a backend may need them to route or list jobs).
type Backend struct {
	// Producer makes jobs durable, as ingest does.
	Producer queue.Producer
	// Consumer is the consumer under test.
	Consumer queue.Consumer
	// Redis holds the backlog counters, cancel markers and job states.
	Redis redis.UniversalClient
	// Redeliver makes the consumer lose every claim it holds, as its
	// death does (Redis: the leases expire and are reaped; Kafka: the
	// member leaves the group), and returns a new consumer that is handed
	// the unfinished jobs again.
	Redeliver func(t *testing.T) queue.Consumer
	// DeadLetters returns the dead-letter records of tenant, oldest first.
	DeadLetters func(t *testing.T, tenant string) []queue.DeadLetter
}

// NewBackend builds a Backend for tenants; it ends with the test.
type NewBackend func(t *testing.T, tenants ...string) *Backend

// Run runs every conformance case in parallel, each on its own backend
// and tenants.
func Run(t *testing.T, newBackend NewBackend) {
	cases := []struct {
		name string
		run  func(t *testing.T, nb NewBackend)
	}{
		{"ClaimInOrder", testClaimInOrder},
		{"FinishDone", testFinishDone},
		{"FinishDropped", testFinishDropped},
		{"FinishDead", testFinishDead},
		{"DeferDueLater", testDefer},
		{"Release", testRelease},
		{"Extend", testExtend},
		{"LeaseLostAndRedelivery", testRedelivery},
		{"Cancelled", testCancelled},
		{"Heartbeat", testHeartbeat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newBackend)
		})
	}
}

// enqueue makes jobs ids of tenant (cost 2 each) durable.
func enqueue(t *testing.T, b *Backend, tenant string, ids ...string) {
	t.Helper()
	jobs := make([]queue.Envelope, len(ids))
	for i, id := range ids {
		jobs[i] = Job(tenant, id, 2)
	}
	if err := b.Producer.Enqueue(context.Background(), jobs); err != nil {
		t.Fatalf("enqueue %v: %v", ids, err)
	}
}

// claim claims tenant's next job from c, waiting up to 15s for one.
func claim(t *testing.T, c queue.Consumer, tenant string) *queue.Claimed {
	t.Helper()
	var job *queue.Claimed
	testenv.WaitFor(t, 15*time.Second, "a job of "+tenant, func() bool {
		j, wait, err := c.Claim(context.Background(), tenant)
		if err != nil {
			t.Fatalf("claim %s: %v", tenant, err)
		}
		if j == nil {
			time.Sleep(min(wait, 50*time.Millisecond))
		}
		job = j
		return j != nil
	})
	return job
}

// claimNone checks that c hands out no job of tenant for d.
func claimNone(t *testing.T, c queue.Consumer, tenant string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		j, wait, err := c.Claim(context.Background(), tenant)
		if err != nil {
			t.Fatalf("claim %s: %v", tenant, err)
		}
		if j != nil {
			t.Fatalf("claimed %s (attempt %d), want no job for %v", j.Envelope.ID, j.Envelope.Attempt, d)
		}
		time.Sleep(min(wait, 50*time.Millisecond))
	}
}

// finish finishes job as out says and fails the test on an error.
func finish(t *testing.T, c queue.Consumer, job *queue.Claimed, out queue.Outcome) {
	t.Helper()
	if err := c.Finish(context.Background(), job, out); err != nil {
		t.Fatalf("finish %s: %v", job.Envelope.ID, err)
	}
}

// state returns the job's recorded state (package jobstate).
func state(t *testing.T, b *Backend, tenant, id string) jobstate.Record {
	t.Helper()
	r, err := jobstate.Get(context.Background(), b.Redis, tenant, id)
	if err != nil {
		t.Fatalf("job state of %s: %v", id, err)
	}
	return r
}

// backlog returns tenant's backlog counter.
func backlog(t *testing.T, b *Backend, tenant string) int64 {
	t.Helper()
	n, err := b.Redis.Get(context.Background(), keys.Backlog(tenant)).Int64()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return n
}
