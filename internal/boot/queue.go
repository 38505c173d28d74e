package boot

import (
	"log/slog"
	"net"
	"os"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue/backend"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// Queue translates the configuration into the queue backend's own config
// (queue does not import config): the backend, the kafka section, the
// drainer's lease, the configured tenants (sorted) and the Redis enqueue's
// replica wait (redis.wait_replicas, redis.wait_timeout), with the shared
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
			Brokers: k.Brokers, Topic: k.Topic, Partitions: k.Partitions,
			ReplicationFactor: k.ReplicationFactor, MinInsyncReplicas: k.MinInsyncReplicas,
			DLQTopic: k.DLQTopic, BatchTimeout: k.BatchTimeout, ProduceTimeout: k.ProduceTimeout,
			ConsumerGroup: k.ConsumerGroup, Instance: instance(cfg, log),
			Group: kafkaq.GroupTimeouts{SessionTimeout: k.SessionTimeout, HeartbeatInterval: k.HeartbeatInterval,
				RebalanceTimeout: k.RebalanceTimeout, RevokeTimeout: revokeTimeout(cfg)},
		},
		Lease:     cfg.Drainer.Lease,
		Tenants:   tenants,
		RedisWait: lua.Wait{Replicas: cfg.Redis.WaitReplicas, Timeout: cfg.Redis.WaitTimeout},
		Redis:     rdb, Logger: log, Registerer: reg,
	}
}

// instance is kafka.instance_id, with "auto" the host name and the port of
// drainer.listen ("host:8081"; the whole address when it has no port), and
// "none" empty (off). "auto" with port 0 (or none) is off, with a warning on
// log: every drainer of the host would share "host:0", and each start would
// remove the other from the group.
func instance(cfg *config.Config, log *slog.Logger) string {
	switch id := cfg.Kafka.InstanceID; id {
	case "none":
		return ""
	case "auto", "":
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		port := cfg.Drainer.Listen
		if _, p, err := net.SplitHostPort(port); err == nil {
			port = p
		}
		if port == "" || port == "0" {
			if log == nil {
				log = slog.Default()
			}
			log.Warn("kafka.instance_id auto needs a fixed drainer.listen port; instance id off",
				"drainer_listen", cfg.Drainer.Listen)
			return ""
		}
		return host + ":" + port
	default:
		return id
	}
}

// revokeTimeout is kafka.revoke_timeout, or when it is 0 the longest
// delivery timeout of the configured tenants (target.timeout, the per-type
// ones too) + 1s, at least kafkaq.DefaultRevokeTimeout: a drainer whose
// partitions are revoked then waits for every delivery it started to end
// before the next owner may start it again.
func revokeTimeout(cfg *config.Config) time.Duration {
	if cfg.Kafka.RevokeTimeout > 0 {
		return cfg.Kafka.RevokeTimeout
	}
	longest := time.Duration(0)
	for _, t := range cfg.Tenants {
		longest = max(longest, targetTimeout(t.Target))
		for _, jt := range t.JobTypes {
			longest = max(longest, targetTimeout(jt.Target))
		}
	}
	return max(kafkaq.DefaultRevokeTimeout, longest+time.Second)
}

// targetTimeout is t's delivery timeout as the drainer applies it.
func targetTimeout(t config.Target) time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return config.DefaultTargetTimeout
}
