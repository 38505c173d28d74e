package redisq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
	"github.com/sluicehq/sluice/queue/redisq"
)

// TestRedisRestartKeepsJobs: on the Redis backend, every job Enqueue
// acknowledged (ingest's 202) is still queued, with its state and in the
// backlog, after redis-server is SIGKILLed and started again, when it runs
// with the append-only file (appendfsync everysec, as deploy/local,
// docker-compose and the k8s manifests run it); without persistence the
// same restart loses them all, which is what sluice_redis_persistent and
// the start-up warning are for.
func TestRedisRestartKeepsJobs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		kept bool
	}{
		{"aof everysec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, true},
		{"no persistence", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proc := testenv.StartRedis(t, tc.args...)
			rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), MaxRetries: -1})
			t.Cleanup(func() { rdb.Close() })
			ctx := context.Background()
			tenant := testenv.Name(t, "dur")
			p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
			if err != nil {
				t.Fatal(err)
			}
			const n = 2000
			for b := 0; b < n; b += 100 {
				jobs := make([]queue.Envelope, 100)
				for i := range jobs {
					jobs[i] = queuetest.Job(tenant, fmt.Sprintf("j%05d", b+i), 1)
				}
				if err := p.Enqueue(ctx, jobs); err != nil {
					t.Fatal(err)
				}
			}
			proc.Kill() // right after the last acknowledged enqueue
			proc.Start()
			testenv.WaitFor(t, 10*time.Second, "Redis loaded", func() bool { return rdb.Ping(ctx).Err() == nil })
			want := int64(0)
			if tc.kept {
				want = n
			}
			if got := rdb.LLen(ctx, keys.Queue(tenant)).Val(); got != want {
				t.Errorf("queued after the restart: %d of %d acknowledged, want %d", got, n, want)
			}
			if b, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int64(); b != want {
				t.Errorf("backlog after the restart: %d, want %d", b, want)
			}
			if _, err := jobstate.Get(ctx, rdb, tenant, "j01999"); (err == nil) != tc.kept {
				t.Errorf("the last job's state after the restart: err %v, want found = %v", err, tc.kept)
			}
		})
	}
}
