package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// moveFixture is a private Redis, a Redis-backend producer and a scheduler
// whose steps (take, enqueue) a test drives one at a time.
func moveFixture(t *testing.T, lease time.Duration) (*redis.Client, *redisq.Producer, *Scheduler) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Redis: rdb, Producer: p, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return rdb, p, s
}

// queued asserts that tenant's queue holds want jobs and id's state is
// queued.
func queued(t *testing.T, rdb *redis.Client, tenant, id string, want int64) {
	t.Helper()
	ctx := context.Background()
	if n, err := rdb.LLen(ctx, keys.Queue(tenant)).Result(); err != nil || n != want {
		t.Errorf("queue length = %d, %v; want %d", n, err, want)
	}
	if rec, err := jobstate.Get(ctx, rdb, tenant, id); err != nil || rec.State != jobstate.Queued {
		t.Errorf("state of %s = %+v, %v; want queued", id, rec, err)
	}
}

// TestRetryDuringMoveKeepsOneCopy: a store whose outcome was unknown,
// retried with the same job while the scheduler moves it (taken, not yet
// enqueued), answers stored and leaves the move alone: the mover queues
// exactly one copy, and nothing is left to take after the move.
func TestRetryDuringMoveKeepsOneCopy(t *testing.T) {
	t.Parallel()
	rdb, _, s := moveFixture(t, 200*time.Millisecond)
	ctx := context.Background()
	tenant := testenv.Name(t, "rdm")
	j := job(tenant, "a", time.Now().Add(20*time.Millisecond))
	if err := Add(ctx, rdb, tenant, []Job{j}, 10); err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Millisecond)
	r, err := s.take(ctx, tenant, 10)
	if err != nil || len(r.Jobs) != 1 {
		t.Fatalf("take = %+v, %v; want the due job", r, err)
	}
	if err := Add(ctx, rdb, tenant, []Job{j}, 10); err != nil {
		t.Fatalf("the retry during the move: %v, want stored", err)
	}
	if _, _, err := s.enqueue(ctx, tenant, r.Jobs); err != nil {
		t.Fatal(err)
	}
	queued(t, rdb, tenant, "a", 1)
	time.Sleep(250 * time.Millisecond) // past the move lease
	if r, err := s.take(ctx, tenant, 10); err != nil || len(r.Jobs) != 0 || r.Count != 0 {
		t.Errorf("take after the move = %+v, %v; want nothing left", r, err)
	}
	queued(t, rdb, tenant, "a", 1)
}

// TestRetakeAfterUnknownEnqueue: a mover whose enqueue wrote the job but
// whose reply was lost (the move stays leased) takes the job again after
// the lease; that take keeps the queued state's enqueued_at, so the second
// enqueue skips the job: one copy queued, attempt and state as written.
func TestRetakeAfterUnknownEnqueue(t *testing.T) {
	t.Parallel()
	rdb, p, s := moveFixture(t, 100*time.Millisecond)
	ctx := context.Background()
	tenant := testenv.Name(t, "rtk")
	if err := Add(ctx, rdb, tenant, []Job{job(tenant, "a", time.Now())}, 10); err != nil {
		t.Fatal(err)
	}
	r, err := s.take(ctx, tenant, 10)
	if err != nil || len(r.Jobs) != 1 {
		t.Fatalf("take = %+v, %v; want the due job", r, err)
	}
	env, err := queue.Decode([]byte(r.Jobs[0].Envelope))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Enqueue(ctx, []queue.Envelope{env}); err != nil { // its reply "lost"
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	r, err = s.take(ctx, tenant, 10)
	if err != nil || len(r.Jobs) != 1 {
		t.Fatalf("retake after the lease = %+v, %v; want the job again", r, err)
	}
	if at, err := rdb.HGet(ctx, keys.JobState(tenant, "a"), "enqueued_at").Result(); err != nil || at == "" {
		t.Errorf("enqueued_at of the queued job after the retake: %q, %v; want kept", at, err)
	}
	if _, _, err := s.enqueue(ctx, tenant, r.Jobs); err != nil {
		t.Fatal(err)
	}
	queued(t, rdb, tenant, "a", 1)
}

// TestAddTimeoutIsUnknown: a store whose script was sent but not answered
// in time (Redis busy: DEBUG SLEEP, the client's read timeout first) is an
// unknown outcome (Redis may run it after all); a store that never reached Redis (stopped) is not. Before, both
// were "cannot be stored": ingest released the ids, and a retry stored the
// job a second time under another enqueued_at.
func TestAddTimeoutIsUnknown(t *testing.T) {
	t.Parallel()
	proc := testenv.StartRedis(t, "--enable-debug-command", "yes")
	admin := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { admin.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	tenant := testenv.Name(t, "tmo")
	// Load the script first: after the sleep the timed-out call then runs
	// as EVALSHA rather than failing with NOSCRIPT.
	if err := Add(ctx, admin, tenant, []Job{job(tenant, "warm", time.Now().Add(time.Hour))}, 10); err != nil {
		t.Fatal(err)
	}
	slept := make(chan error, 1)
	go func() { slept <- admin.Do(ctx, "DEBUG", "SLEEP", "0.6").Err() }()
	time.Sleep(100 * time.Millisecond) // the server asleep
	err := Add(ctx, rdb, tenant, []Job{job(tenant, "a", time.Now().Add(time.Hour))}, 10)
	if !errors.Is(err, queue.ErrUnknownOutcome) {
		t.Errorf("Add with its script unanswered = %v, want an unknown outcome", err)
	}
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
	proc.Stop()
	if err := Add(ctx, rdb, tenant, []Job{job(tenant, "b", time.Now().Add(time.Hour))}, 10); err == nil || errors.Is(err, queue.ErrUnknownOutcome) {
		t.Errorf("Add with Redis stopped = %v, want an error that is not an unknown outcome", err)
	}
}
