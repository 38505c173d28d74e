package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// exampleRedisAddr is the Redis the tests use (SLUICE_TEST_REDIS).
func exampleRedisAddr() string {
	if addr := os.Getenv("SLUICE_TEST_REDIS"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

// ExampleNewProducer queues two jobs of one tenant on the local Redis
// (deploy/local/services.sh up): one list push and one backlog increment,
// in one script.
func ExampleNewProducer() {
	rdb := redis.NewClient(&redis.Options{Addr: exampleRedisAddr(), ReadTimeout: 250 * time.Millisecond})
	defer rdb.Close()
	ctx := context.Background()
	tenant := "example-tenant"
	defer rdb.Del(ctx, keys.Queue(tenant), keys.Backlog(tenant))
	rdb.Del(ctx, keys.Queue(tenant), keys.Backlog(tenant))

	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb, Registerer: prometheus.NewRegistry()})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = p.Enqueue(ctx, []queue.Envelope{
		{ID: "job-1", Tenant: tenant, Type: "email", Cost: 1},
		{ID: "job-2", Tenant: tenant, Type: "video", Cost: 5},
	})
	switch {
	case errors.Is(err, queue.ErrUnavailable):
		fmt.Println("503, retry later:", err)
	case err != nil:
		fmt.Println("400:", err)
	default:
		fmt.Println("queued", rdb.LLen(ctx, keys.Queue(tenant)).Val(), "jobs, backlog", rdb.Get(ctx, keys.Backlog(tenant)).Val())
	}
	// Output:
	// queued 2 jobs, backlog 6
}
