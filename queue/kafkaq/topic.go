package kafkaq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/queue"
)

// topicReadyTimeout bounds the wait for a topic's partition leaders after
// CreateTopics, when ctx has no earlier deadline.
const topicReadyTimeout = 30 * time.Second

// topicPollInterval is the pause between two Metadata requests while waiting
// for partition leaders.
const topicPollInterval = 50 * time.Millisecond

// Most replicas a topic may have (kafka.replication_factor and
// kafka.min_insync_replicas; config/validate.go refers to it).
const MaxReplicationFactor = 32

// autoReplicas is the most replicas an auto replication factor (0) gives:
// min(autoReplicas, brokers in the cluster's metadata).
const autoReplicas = 3

// TopicSpec is how sluice creates one of its topics (jobs, DLQ).
type TopicSpec struct {
	Name       string
	Partitions int
	// ReplicationFactor: 0 is min(3, the brokers in the cluster's
	// metadata), so a single broker gets 1 and a cluster of 3 or more gets
	// 3.
	ReplicationFactor int
	// MinInsyncReplicas becomes the topic's min.insync.replicas, the
	// replicas an acks=all write must reach (fewer: NOT_ENOUGH_REPLICAS,
	// which Enqueue returns as queue.ErrUnavailable, a 503). 0 is 2 when the
	// replication factor is 3 or more, else the broker's default (not set
	// on the topic). At most the replication factor.
	MinInsyncReplicas int
}

// Replication resolves the spec's auto values for a cluster of brokers
// nodes: the replication factor, and the min.insync.replicas to set on the
// topic (0: leave the broker's default). It fails when min.insync.replicas
// exceeds the replication factor. A replication factor above the brokers is
// left to the cluster to refuse when it creates the topic (an existing
// topic is kept while brokers are down).
func (s TopicSpec) Replication(brokers int) (rf, minISR int, err error) {
	rf, minISR = s.ReplicationFactor, s.MinInsyncReplicas
	if rf == 0 {
		rf = max(1, min(autoReplicas, brokers))
	}
	if minISR == 0 && rf >= 3 {
		minISR = 2
	}
	if minISR > rf {
		err = fmt.Errorf("min.insync.replicas %d is more than the replication factor %d (kafka.replication_factor %d, 0 = min(3, brokers); %d brokers)",
			minISR, rf, s.ReplicationFactor, brokers)
	}
	return rf, minISR, err
}

// EnsureTopic creates the topic of spec when it does not exist, with its
// partitions, replication factor and min.insync.replicas resolved against
// the brokers the cluster's metadata lists (TopicSpec.Replication). An
// existing topic is left as it is: a partition count other than spec's,
// or fewer replicas than the resolved replication factor (it loses writes
// or availability with a broker), is logged as a warning. Then it waits
// until every partition of the topic has a leader that serves it, so the
// first produce does not fail with LeaderNotAvailable or
// NotLeaderOrFollower. The wait is bounded by ctx and by 30s. log may be
// nil. Errors reaching the cluster wrap queue.ErrUnavailable.
func EnsureTopic(ctx context.Context, client *kafka.Client, spec TopicSpec, log *slog.Logger) error {
	topic := spec.Name
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return queue.Unavailable("kafka metadata for topic "+topic, err)
	}
	rf, minISR, err := spec.Replication(len(md.Brokers))
	if err != nil {
		return fmt.Errorf("queue: kafka topic %s: %w", topic, err)
	}
	tc := kafka.TopicConfig{Topic: topic, NumPartitions: spec.Partitions, ReplicationFactor: rf}
	if minISR > 0 {
		tc.ConfigEntries = []kafka.ConfigEntry{{ConfigName: "min.insync.replicas", ConfigValue: strconv.Itoa(minISR)}}
	}
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err != nil {
		return queue.Unavailable("kafka create topic "+topic, err)
	}
	if terr := resp.Errors[topic]; terr != nil && !errors.Is(terr, kafka.TopicAlreadyExists) {
		return fmt.Errorf("queue: kafka create topic %s (%d partitions, replication %d, min.insync.replicas %d): %w",
			topic, spec.Partitions, rf, minISR, terr)
	}
	ctx, cancel := context.WithTimeout(ctx, topicReadyTimeout)
	defer cancel()
	for {
		layout, err := leadersReady(ctx, client, topic)
		if err == nil {
			warnLayout(log, spec, rf, layout)
			return nil
		}
		select {
		case <-ctx.Done():
			return queue.Unavailable("kafka wait for leaders of "+topic, fmt.Errorf("%w (last: %w)", ctx.Err(), err))
		case <-time.After(topicPollInterval):
		}
	}
}

// topicLayout is what the metadata says of a ready topic.
type topicLayout struct {
	partitions  int
	minReplicas int // the fewest replicas of any partition
}

// warnLayout logs an existing topic whose partitions or replicas differ
// from what sluice would create.
func warnLayout(log *slog.Logger, spec TopicSpec, rf int, got topicLayout) {
	if log == nil {
		return
	}
	if got.partitions != spec.Partitions {
		log.Warn("kafka topic exists with another partition count; keeping it",
			"topic", spec.Name, "partitions", got.partitions, "configured_partitions", spec.Partitions)
	}
	if got.minReplicas < rf {
		log.Warn("kafka topic exists with fewer replicas than configured; keeping it (raise them with kafka-reassign-partitions)",
			"topic", spec.Name, "replication_factor", got.minReplicas, "configured_replication_factor", rf)
	}
}

// leadersReady returns the topic's layout when every partition has a leader
// that answers ListOffsets, or an error saying what is missing.
func leadersReady(ctx context.Context, client *kafka.Client, topic string) (topicLayout, error) {
	var none topicLayout
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return none, err
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return none, t.Error
		}
		if len(t.Partitions) == 0 {
			return none, fmt.Errorf("topic %s has no partitions yet", topic)
		}
		layout := topicLayout{partitions: len(t.Partitions), minReplicas: len(t.Partitions[0].Replicas)}
		offsets := make([]kafka.OffsetRequest, len(t.Partitions))
		for i, p := range t.Partitions {
			layout.minReplicas = min(layout.minReplicas, len(p.Replicas))
			if p.Error != nil {
				return none, fmt.Errorf("partition %d: %w", p.ID, p.Error)
			}
			if p.Leader.Host == "" {
				return none, fmt.Errorf("partition %d has no leader yet", p.ID)
			}
			offsets[i] = kafka.LastOffsetOf(p.ID)
		}
		// Metadata may name a leader before that broker's replica acts as
		// one (KRaft publishes the metadata first); a produce then gets
		// NotLeaderOrFollower. ListOffsets is answered by the leader replica
		// itself, so its success means the partition takes writes.
		lo, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: offsets}})
		if err != nil {
			return none, err
		}
		if got := len(lo.Topics[topic]); got != len(offsets) {
			return none, fmt.Errorf("offsets of %d of %d partitions", got, len(offsets))
		}
		for _, po := range lo.Topics[topic] {
			if po.Error != nil {
				return none, fmt.Errorf("partition %d: %w", po.Partition, po.Error)
			}
		}
		return layout, nil
	}
	return none, fmt.Errorf("topic %s not in metadata yet", topic)
}
