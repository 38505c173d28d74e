package redisq

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// TestSkippedRetryWaits: with Wait.Replicas 1, the retry of an enqueue whose
// WAIT fell short, sent on another connection while the replica still
// lags (SIGSTOPped, its link up), is short too: the script skips the job
// already written but still writes after it, so the WAIT waits for the
// replica to hold the job instead of returning at once on a connection
// that wrote nothing. (Redis 7.0 moves a connection's write offset on
// every command, so there the WAIT waits either way; a Redis that moves
// it only on a write would not.)
func TestSkippedRetryWaits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary := testenv.StartRedis(t, "--repl-diskless-sync-delay", "0")
	replica := testenv.StartReplica(t, primary)
	w := lua.Wait{Replicas: 1, Timeout: 100 * time.Millisecond}
	producer := func() *Producer {
		rdb := redis.NewClient(&redis.Options{Addr: primary.Addr()})
		t.Cleanup(func() { rdb.Close() })
		p, err := NewProducer(ProducerConfig{Redis: rdb, Wait: w})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tenant := testenv.Name(t, "skipw")
	job := queuetest.Stored(time.Now(), queuetest.Job(tenant, "a", 1))[0]
	first, retry := producer(), producer()
	w.Timeout = time.Second // ample for the warm-up with the replica in sync
	warm := producer()
	w.Timeout = 100 * time.Millisecond
	if err := warm.Enqueue(ctx, []queue.Envelope{queuetest.Job(tenant, "warm", 1)}); err != nil {
		t.Fatalf("enqueue with the replica in sync: %v", err)
	}
	replica.Pause()
	defer replica.Resume()
	if err := first.Enqueue(ctx, []queue.Envelope{job}); !errors.Is(err, queue.ErrUnknownOutcome) {
		t.Fatalf("enqueue with the replica paused = %v, want ErrUnknownOutcome", err)
	}
	if err := retry.Enqueue(ctx, []queue.Envelope{job}); !errors.Is(err, queue.ErrUnknownOutcome) {
		t.Errorf("retry on another connection with the replica paused = %v, want ErrUnknownOutcome (not acked)", err)
	}
	if got := queued(t, redis.NewClient(&redis.Options{Addr: primary.Addr()}), tenant); len(got) != 2 {
		t.Errorf("queue after the retry = %d jobs, want 2 (warm, a once)", len(got))
	}
}
