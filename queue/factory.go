package queue

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/config"
)

// New returns the Producer of cfg.Queue.Backend: "redis" (the default when
// empty) returns a RedisProducer on deps.Redis;
// "kafka" creates the topic when absent and returns a KafkaProducer, with
// deps.Redis holding the backlog counters. Any other backend is an error.
func New(ctx context.Context, cfg *config.Config, deps ProducerDeps) (Producer, error) {
	switch cfg.Queue.Backend {
	case "redis", "":
		return NewRedisProducer(deps.Redis, deps.Registerer)
	case "kafka":
		return NewKafkaProducer(ctx, cfg.Kafka, deps)
	default:
		return nil, fmt.Errorf("queue: queue.backend %q: want redis or kafka", cfg.Queue.Backend)
	}
}
