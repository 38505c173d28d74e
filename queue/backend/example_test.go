package backend_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue/backend"
)

// exampleRedisAddr is the Redis the tests use (SLUICE_TEST_REDIS).
func exampleRedisAddr() string {
	if addr := os.Getenv("SLUICE_TEST_REDIS"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

// ExampleNew picks the backend from the configuration.
func ExampleNewProducer() {
	rdb := redis.NewClient(&redis.Options{Addr: exampleRedisAddr()})
	defer rdb.Close()
	p, err := backend.NewProducer(context.Background(), backend.Config{Backend: backend.Redis, Redis: rdb})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	fmt.Printf("%T\n", p)
	// Output:
	// *redisq.Producer
}
