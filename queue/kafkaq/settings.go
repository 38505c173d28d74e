package kafkaq

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Settings (config/defaults.go refers to them for the kafka
// section of the file).
const (
	DefaultBroker            = "127.0.0.1:9092"
	DefaultTopic             = "sluice.jobs"
	DefaultDLQTopic          = "sluice.dlq"
	DefaultConsumerGroup     = "sluice-drainer"
	DefaultPartitions        = 12
	DefaultReplicationFactor = 0 // auto: min(3, brokers); see TopicSpec
	DefaultMinInsyncReplicas = 0 // auto: 2 when the replication factor is >= 3
	DefaultBatchTimeout      = 100 * time.Microsecond
	DefaultProduceTimeout    = 2 * time.Second
)

// Settings are the Kafka backend's cluster and topic settings, shared by its
// Producer and Consumer. A zero field takes the default named on it.
type Settings struct {
	// Brokers are the bootstrap brokers (default [DefaultBroker]).
	Brokers []string
	// Topic holds every job, keyed by tenant (default DefaultTopic).
	Topic string
	// Partitions is used when a topic is created (default
	// DefaultPartitions).
	Partitions int
	// ReplicationFactor is used when a topic is created (0, the default:
	// min(3, brokers in the cluster's metadata); at most
	// MaxReplicationFactor). See TopicSpec.
	ReplicationFactor int
	// MinInsyncReplicas is the created topics' min.insync.replicas (0, the
	// default: 2 when the replication factor is 3 or more, else the
	// broker's default); at most the replication factor.
	MinInsyncReplicas int
	// DLQTopic receives dead jobs (default DefaultDLQTopic); it must differ
	// from Topic.
	DLQTopic string
	// BatchTimeout is the longest a produce request waits for company after
	// a shared one (default DefaultBatchTimeout); see Producer.
	BatchTimeout time.Duration
	// ProduceTimeout bounds one Enqueue, and one dead-letter write, until
	// every in-sync replica has acknowledged (default DefaultProduceTimeout).
	ProduceTimeout time.Duration
	// ConsumerGroup is the drainers' consumer group (default
	// DefaultConsumerGroup).
	ConsumerGroup string
	// Instance names this drainer instance, stable across restarts of its
	// process and unique among the live ones (internal/boot: the
	// configured kafka.instance_id, else host name and metrics port). When
	// set, a restarted consumer removes its killed predecessor's member
	// from the group at start (member.go). Empty turns that off.
	Instance string
	// Group holds the consumer group's timeouts; a ConsumerConfig's own
	// fields of the same names win, and zero ones take the defaults.
	Group GroupTimeouts
}

// GroupTimeouts are the consumer group's timeouts (config kafka.*; see
// ConsumerConfig for each).
type GroupTimeouts struct {
	SessionTimeout, HeartbeatInterval, RebalanceTimeout, RevokeTimeout time.Duration
}

// withDefaults returns s with every zero field set to its default, or an
// error for settings no default can mend.
func (s Settings) withDefaults() (Settings, error) {
	if len(s.Brokers) == 0 {
		s.Brokers = []string{DefaultBroker}
	}
	setString(&s.Topic, DefaultTopic)
	setString(&s.DLQTopic, DefaultDLQTopic)
	setString(&s.ConsumerGroup, DefaultConsumerGroup)
	if s.Partitions < 0 {
		return s, fmt.Errorf("kafkaq: partitions (%d) must be >= 1", s.Partitions)
	}
	if err := checkReplicas(s.ReplicationFactor, s.MinInsyncReplicas); err != nil {
		return s, err
	}
	setDefault(&s.Partitions, DefaultPartitions)
	setDefault(&s.BatchTimeout, DefaultBatchTimeout)
	setDefault(&s.ProduceTimeout, DefaultProduceTimeout)
	if s.DLQTopic == s.Topic {
		return s, fmt.Errorf("kafkaq: dlq_topic %q must differ from topic", s.DLQTopic)
	}
	for _, b := range s.Brokers {
		if b == "" {
			return s, errors.New("kafkaq: a broker address is empty")
		}
	}
	return s, nil
}

// checkReplicas checks a replication factor and min.insync.replicas: each
// 0 (auto) to MaxReplicationFactor, min.insync.replicas at most an explicit
// replication factor.
func checkReplicas(rf, minISR int) error {
	switch {
	case rf < 0 || rf > MaxReplicationFactor:
		return fmt.Errorf("kafkaq: replication_factor must be 0 (min(3, brokers)) to %d (got %d)", MaxReplicationFactor, rf)
	case minISR < 0 || minISR > MaxReplicationFactor:
		return fmt.Errorf("kafkaq: min_insync_replicas must be 0 (2 when the replication factor is >= 3) to %d (got %d)", MaxReplicationFactor, minISR)
	case rf > 0 && minISR > rf:
		return fmt.Errorf("kafkaq: min_insync_replicas (%d) must be at most replication_factor (%d)", minISR, rf)
	}
	return nil
}

// topicSpec is the spec of one of the backend's topics.
func (s Settings) topicSpec(name string) TopicSpec {
	return TopicSpec{Name: name, Partitions: s.Partitions, ReplicationFactor: s.ReplicationFactor, MinInsyncReplicas: s.MinInsyncReplicas}
}

func setString(v *string, def string) {
	if *v == "" {
		*v = def
	}
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
