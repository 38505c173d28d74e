package scheduler

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue/redisq"
)

// TestSkippedAddWaits: the retry of a scheduled store whose WAIT fell
// short, sent on another connection while the replica still lags
// (SIGSTOPped, its link up), is short too, whether the job is being moved
// or was moved (both skipped): the script writes after the
// first store, so the WAIT waits for the replica to hold it. (Redis 7.0
// moves a connection's write offset on every command, so there the WAIT
// waits either way; a Redis that moves it only on a write would not.)
func TestSkippedAddWaits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary := testenv.StartRedis(t, "--repl-diskless-sync-delay", "0")
	replica := testenv.StartReplica(t, primary)
	client := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: primary.Addr()})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	first, retry := client(), client()
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: first})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Redis: first, Producer: p, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tenant := testenv.Name(t, "skipw")
	w := lua.Wait{Replicas: 1, Timeout: 100 * time.Millisecond}
	j := job(tenant, "a", time.Now())
	warm := lua.Wait{Replicas: 1, Timeout: time.Second} // ample for a replica in sync
	if err := AddWait(ctx, first, tenant, []Job{job(tenant, "warm", time.Now().Add(time.Hour))}, 10, warm); err != nil {
		t.Fatalf("store with the replica in sync: %v", err)
	}
	replica.Pause()
	defer replica.Resume()
	if err := AddWait(ctx, first, tenant, []Job{j}, 10, w); !errors.Is(err, lua.ErrWaitShort) {
		t.Fatalf("store with the replica paused = %v, want ErrWaitShort", err)
	}
	r, err := s.take(ctx, tenant, 10)
	if err != nil || len(r.Jobs) != 1 {
		t.Fatalf("take = %+v, %v; want the due job", r, err)
	}
	if err := AddWait(ctx, retry, tenant, []Job{j}, 10, w); !errors.Is(err, lua.ErrWaitShort) {
		t.Errorf("retry during the move on another connection = %v, want ErrWaitShort (not acked)", err)
	}
	if _, _, err := s.enqueue(ctx, tenant, r.Jobs); err != nil {
		t.Fatal(err)
	}
	again := client()
	if err := AddWait(ctx, again, tenant, []Job{j}, 10, w); !errors.Is(err, lua.ErrWaitShort) {
		t.Errorf("retry after the move on another connection = %v, want ErrWaitShort (not acked)", err)
	}
}
