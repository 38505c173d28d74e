package redisq_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// TestExtendAllOneRoundTrip: ExtendAll extends the held leases of several
// tenants in one round trip and reports, per tenant, the jobs whose lease
// was lost.
func TestExtendAllOneRoundTrip(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	prod, cons := takeParts(t, rdb)
	held := map[string][]*queue.Claimed{}
	for _, tn := range []string{testenv.Name(t, "exa"), testenv.Name(t, "exb")} {
		envs := []queue.Envelope{{ID: "1", Tenant: tn, Type: "t", Cost: 1}, {ID: "2", Tenant: tn, Type: "t", Cost: 1}}
		if err := prod.Enqueue(ctx, envs); err != nil {
			t.Fatal(err)
		}
		jobs, _, err := cons.Take(ctx, tn, 2)
		if err != nil || len(jobs) != 2 {
			t.Fatalf("take %s: %d jobs, %v", tn, len(jobs), err)
		}
		held[tn] = jobs
	}
	// One lease of the second tenant is lost (reaped meanwhile).
	var second string
	for tn := range held {
		if tn > second {
			second = tn
		}
	}
	rdb.ZRem(ctx, keys.Processing(second), held[second][0].Token())
	rt := &tripCount{}
	rdb.AddHook(rt)
	lost, errs := cons.ExtendAll(ctx, held)
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if n := rt.n.Load(); n != 1 {
		t.Errorf("ExtendAll made %d round trips, want 1", n)
	}
	for tn := range held {
		want := 0
		if tn == second {
			want = 1
		}
		if len(lost[tn]) != want {
			t.Errorf("%s: %d lost, want %d", tn, len(lost[tn]), want)
		}
		score := rdb.ZScore(ctx, keys.Processing(tn), held[tn][1].Token()).Val()
		if left := time.Until(time.UnixMilli(int64(score))); left < 50*time.Second {
			t.Errorf("%s: lease ends in %v, want about a minute", tn, left)
		}
	}
}

// tripCount is a redis.Hook counting round trips (a command or a pipeline),
// a new connection's handshake left out.
type tripCount struct{ n atomic.Int64 }

func (r *tripCount) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *tripCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" { // not a new connection's handshake
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (r *tripCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "client" { // not a new connection's handshake
			r.n.Add(1)
		}
		return next(ctx, cmds)
	}
}
