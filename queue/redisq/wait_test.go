package redisq

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// TestProducerWait: with Wait.Replicas 1, an enqueue on a primary whose
// replica is in sync returns nil, and the WAIT goes in the scripts' own
// round trip; with no replica it fails with an error wrapping
// queue.ErrUnavailable and queue.ErrUnknownOutcome, counted in
// sluice_redis_wait_short_total, while the job is on the primary (so a
// retry with the same client id must find it).
func TestProducerWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary := testenv.StartRedis(t, "--repl-diskless-sync-delay", "0")
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	t.Cleanup(func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	p, err := NewProducer(ProducerConfig{Redis: rdb, Registerer: reg, Wait: lua.Wait{Replicas: 1, Timeout: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	tenant := testenv.Name(t, "wait")

	err = p.Enqueue(ctx, []queue.Envelope{queuetest.Job(tenant, "alone", 1)})
	if !errors.Is(err, queue.ErrUnavailable) || !errors.Is(err, queue.ErrUnknownOutcome) {
		t.Fatalf("Enqueue without a replica = %v, want ErrUnavailable and ErrUnknownOutcome", err)
	}
	if got := testenv.MetricValue(t, reg, "sluice_redis_wait_short_total", nil); got != 1 {
		t.Errorf("sluice_redis_wait_short_total = %v, want 1", got)
	}
	if got := queued(t, rdb, tenant); len(got) != 1 || got[0].ID != "alone" {
		t.Errorf("queue after the short WAIT = %v, want the job (on the primary, outcome unknown)", got)
	}

	replica := testenv.StartReplica(t, primary)
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	t.Cleanup(func() { rc.Close() })
	// Ample: a replica in sync acknowledges within milliseconds.
	p, err = NewProducer(ProducerConfig{Redis: rdb, Registerer: reg, Wait: lua.Wait{Replicas: 1, Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	before := testenv.CommandCalls(t, rdb, "evalsha", "eval", "wait")
	trips := &roundTrips{}
	rdb.AddHook(trips)
	for _, id := range []string{"b1", "b2"} {
		if err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job(tenant, id, 1)}); err != nil {
			t.Fatalf("Enqueue %s with the replica in sync: %v", id, err)
		}
	}
	enqueueTrips := trips.seen()
	if got := testenv.CommandCalls(t, rdb, "evalsha", "eval", "wait") - before; got != 4 {
		t.Errorf("EVALSHA+EVAL+WAIT calls for two enqueues = %d, want 4 (one script and one WAIT each)", got)
	}
	// The WAIT is in the script's own pipeline: one round trip per enqueue.
	if got := enqueueTrips; len(got) != 2 || got[0] != "evalsha wait" || got[1] != "evalsha wait" {
		t.Errorf("round trips of two enqueues = %q, want [\"evalsha wait\" \"evalsha wait\"] (the WAIT in the script's pipeline)", got)
	}
	if got := queued(t, rc, tenant); len(got) != 3 {
		t.Errorf("jobs on the replica = %d, want 3", len(got))
	}
	if got := testenv.MetricValue(t, reg, "sluice_redis_wait_short_total", nil); got != 1 {
		t.Errorf("sluice_redis_wait_short_total = %v after acknowledged enqueues, want still 1", got)
	}
}

// roundTrips is a redis.Hook recording each round trip (a command or a
// pipeline) as its commands' names.
type roundTrips struct {
	mu    sync.Mutex
	trips []string
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.add([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.add(cmds)
		return next(ctx, cmds)
	}
}

func (r *roundTrips) add(cmds []redis.Cmder) {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.Name()
	}
	r.mu.Lock()
	r.trips = append(r.trips, strings.Join(names, " "))
	r.mu.Unlock()
}

func (r *roundTrips) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.trips...)
}
