package boot

import (
	"log/slog"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/queue/backend"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// Queue translates the configuration into the queue backend's own config
// (queue does not import config): the backend, the kafka section, the
// drainer's lease and the configured tenants (sorted), with the shared
// services.
func Queue(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger, reg prometheus.Registerer) backend.Config {
	k := cfg.Kafka
	tenants := make([]string, 0, len(cfg.Tenants))
	for t := range cfg.Tenants {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	return backend.Config{
		Backend: cfg.Queue.Backend,
		Kafka: kafkaq.Settings{
			Brokers: k.Brokers, Topic: k.Topic, Partitions: k.Partitions, ReplicationFactor: k.ReplicationFactor,
			DLQTopic: k.DLQTopic, BatchTimeout: k.BatchTimeout, ProduceTimeout: k.ProduceTimeout,
			ConsumerGroup: k.ConsumerGroup,
		},
		Lease:   cfg.Drainer.Lease,
		Tenants: tenants,
		Redis:   rdb, Logger: log, Registerer: reg,
	}
}
