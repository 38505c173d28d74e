package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// exampleRedisAddr is the Redis the tests use (SLUICE_TEST_REDIS).
func exampleRedisAddr() string {
	if addr := os.Getenv("SLUICE_TEST_REDIS"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

func ExampleEnvelope_Encode() {
	e := queue.Envelope{
		Version: queue.EnvelopeVersion, ID: "job-1", Tenant: "acme", Type: "email",
		Payload: json.RawMessage(`{"to":"ops@example.com"}`), Cost: 1,
		EnqueuedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	}
	b, _ := e.Encode()
	fmt.Println(string(b))
	// Output:
	// {"v":1,"id":"job-1","tenant":"acme","type":"email","payload":{"to":"ops@example.com"},"cost":1,"attempt":0,"enqueued_at":"2026-03-01T12:00:00Z"}
}

func ExampleDecode() {
	e, err := queue.Decode([]byte(`{"v":1,"id":"job-1","tenant":"acme","cost":2,"enqueued_at":"2026-03-01T12:00:00Z"}`))
	fmt.Println(e.ID, e.Tenant, e.Cost, err)
	_, err = queue.Decode([]byte(`{"v":9,"id":"job-1","tenant":"acme"}`))
	fmt.Println(errors.Is(err, queue.ErrUnknownVersion))
	// Output:
	// job-1 acme 2 <nil>
	// true
}

// ExampleNewRedisProducer queues two jobs of one tenant on the local Redis
// (deploy/local/services.sh up): one list push and one backlog increment,
// in one script.
func ExampleNewRedisProducer() {
	rdb := redis.NewClient(&redis.Options{Addr: exampleRedisAddr(), ReadTimeout: 250 * time.Millisecond})
	defer rdb.Close()
	ctx := context.Background()
	tenant := "example-tenant"
	defer rdb.Del(ctx, keys.Queue(tenant), keys.Backlog(tenant))
	rdb.Del(ctx, keys.Queue(tenant), keys.Backlog(tenant))

	p, err := queue.NewRedisProducer(rdb, prometheus.NewRegistry())
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

// ExampleNewKafkaProducer builds the Kafka producer; the topic is created
// with 12 partitions if it does not exist yet.
func ExampleNewKafkaProducer() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	p, err := queue.NewKafkaProducer(ctx, config.Kafka{
		Brokers: []string{"127.0.0.1:9092"}, Topic: "sluice.jobs",
		Partitions: 12, ReplicationFactor: 1, BatchTimeout: 2 * time.Millisecond,
	}, queue.ProducerDeps{Redis: rdb, Log: slog.Default(), Registerer: prometheus.DefaultRegisterer})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	err = p.Enqueue(ctx, []queue.Envelope{{ID: "job-1", Tenant: "acme", Cost: 1}})
	fmt.Println(err)
}

// ExampleEnsureTopic creates a dead-letter topic the way the producer
// creates its own: with the configured partitions when it is absent, then
// waiting for every partition's leader.
func ExampleEnsureTopic() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP("127.0.0.1:9092"), Timeout: 5 * time.Second}
	err := queue.EnsureTopic(ctx, client, "sluice.dlq", 3, 1, slog.Default())
	fmt.Println(err)
}

// ExampleNew picks the backend from the configuration.
func ExampleNew() {
	cfg := &config.Config{Queue: config.Queue{Backend: "redis"}}
	rdb := redis.NewClient(&redis.Options{Addr: exampleRedisAddr()})
	defer rdb.Close()
	p, err := queue.New(context.Background(), cfg, queue.ProducerDeps{Redis: rdb, Registerer: prometheus.NewRegistry()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	fmt.Printf("%T\n", p)
	// Output:
	// *queue.RedisProducer
}
