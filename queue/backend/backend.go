// Package backend builds the configured queue backend: the Producer ingest
// writes to and the Consumer a drainer drains, of queue/redisq or
// queue/kafkaq. It is the one place that knows both; the services translate
// their configuration into its Config (they and the backends never meet).
package backend

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
	"github.com/sluicehq/sluice/queue/redisq"
)

// Backend names.
const (
	Redis = "redis" // one Redis list per tenant (queue/redisq), the default
	Kafka = "kafka" // one Kafka topic keyed by tenant (queue/kafkaq)
)

// Config selects and configures a queue backend. The zero value is the
// Redis backend (given Redis).
type Config struct {
	// Backend is Redis (the default when empty) or Kafka; anything else is
	// an error.
	Backend string
	// Kafka is the Kafka backend's cluster and topics (ignored by Redis;
	// zero fields take kafkaq's defaults).
	Kafka kafkaq.Settings
	// Lease is how long a Redis claim stays leased without Extend (default
	// redisq.DefaultLease); Kafka holds no lease, and uses it for the
	// deliveries its Take starts (kafkaq.ConsumerConfig.Lease). It is the
	// drainer's lease (drainer.lease).
	Lease time.Duration
	// Tenants are the configured tenants, which a consumer always lists.
	Tenants []string
	// RedisWait makes the Redis backend's enqueue wait for replicas
	// (lua.Wait, redisq.ProducerConfig.Wait; zero: no wait). Kafka ignores it: there Kafka's
	// acknowledgement from the in-sync replicas makes a job durable.
	RedisWait lua.Wait

	// Redis holds the Redis queues (required by Redis) and, with either
	// backend, the backlog counters, cancel markers and job states (with
	// Kafka, nil skips them).
	Redis redis.UniversalClient
	// Logger receives what the backend does not return. Nil is
	// slog.Default().
	Logger *slog.Logger
	// Registerer receives the backend's metrics. Nil registers nothing.
	Registerer prometheus.Registerer
	// Clock reads the time (default clock.Real).
	Clock clock.Clock
}

// NewProducer returns the Producer of cfg.Backend: with Kafka it creates
// the topic when absent (bounded by ctx).
func NewProducer(ctx context.Context, cfg Config) (queue.Producer, error) {
	switch cfg.Backend {
	case Redis, "":
		return redisq.NewProducer(redisq.ProducerConfig{Redis: cfg.Redis, Registerer: cfg.Registerer, Clock: cfg.Clock, Wait: cfg.RedisWait})
	case Kafka:
		return kafkaq.NewProducer(ctx, kafkaq.ProducerConfig{Kafka: cfg.Kafka, Redis: cfg.Redis,
			Logger: cfg.Logger, Registerer: cfg.Registerer, Clock: cfg.Clock})
	default:
		return nil, unknown(cfg.Backend)
	}
}

// NewConsumer returns the Consumer of cfg.Backend and the function that
// runs it until its context ends: Kafka's consumer-group membership, for
// Redis a function that only waits. With Kafka it creates the DLQ topic
// when absent (bounded by ctx). Run the function after the consumer's users
// are built; stop them before cancelling its context.
func NewConsumer(ctx context.Context, cfg Config) (queue.Consumer, func(context.Context) error, error) {
	switch cfg.Backend {
	case Redis, "":
		c, err := redisq.NewConsumer(redisq.ConsumerConfig{Redis: cfg.Redis, Lease: cfg.Lease, Tenants: cfg.Tenants, Clock: cfg.Clock})
		if err != nil {
			return nil, nil, err
		}
		return c, func(ctx context.Context) error { <-ctx.Done(); return nil }, nil
	case Kafka:
		c, err := kafkaq.NewConsumer(ctx, kafkaq.ConsumerConfig{Kafka: cfg.Kafka, Tenants: cfg.Tenants, Lease: cfg.Lease,
			Redis: cfg.Redis, Logger: cfg.Logger, Registerer: cfg.Registerer, Clock: cfg.Clock})
		if err != nil {
			return nil, nil, err
		}
		return c, c.Run, nil
	default:
		return nil, nil, unknown(cfg.Backend)
	}
}

func unknown(name string) error {
	return fmt.Errorf("queue: queue.backend %q: want redis or kafka", name)
}
