package kafkaq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// EnsureTopic creates topic with the given partitions and replication factor
// when it does not exist (an existing topic is left as it is; a partition
// count other than partitions is logged as a warning), then waits until
// every partition of the topic has a leader that serves it, so the first
// produce does not fail with LeaderNotAvailable or NotLeaderOrFollower. The wait is bounded by ctx and by 30s. log
// may be nil.
// Errors reaching the cluster wrap queue.ErrUnavailable.
func EnsureTopic(ctx context.Context, client *kafka.Client, topic string, partitions, replication int, log *slog.Logger) error {
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: partitions, ReplicationFactor: replication}},
	})
	if err != nil {
		return queue.Unavailable("kafka create topic "+topic, err)
	}
	if terr := resp.Errors[topic]; terr != nil && !errors.Is(terr, kafka.TopicAlreadyExists) {
		return fmt.Errorf("queue: kafka create topic %s (%d partitions, replication %d): %w", topic, partitions, replication, terr)
	}
	ctx, cancel := context.WithTimeout(ctx, topicReadyTimeout)
	defer cancel()
	for {
		n, err := leadersReady(ctx, client, topic)
		if err == nil {
			if n != partitions && log != nil {
				log.Warn("kafka topic exists with another partition count; keeping it",
					"topic", topic, "partitions", n, "configured_partitions", partitions)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return queue.Unavailable("kafka wait for leaders of "+topic, fmt.Errorf("%w (last: %w)", ctx.Err(), err))
		case <-time.After(topicPollInterval):
		}
	}
}

// leadersReady returns the topic's partition count when every partition has
// a leader that answers ListOffsets, or an error saying what is missing.
func leadersReady(ctx context.Context, client *kafka.Client, topic string) (int, error) {
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return 0, t.Error
		}
		if len(t.Partitions) == 0 {
			return 0, fmt.Errorf("topic %s has no partitions yet", topic)
		}
		offsets := make([]kafka.OffsetRequest, len(t.Partitions))
		for i, p := range t.Partitions {
			if p.Error != nil {
				return 0, fmt.Errorf("partition %d: %w", p.ID, p.Error)
			}
			if p.Leader.Host == "" {
				return 0, fmt.Errorf("partition %d has no leader yet", p.ID)
			}
			offsets[i] = kafka.LastOffsetOf(p.ID)
		}
		// Metadata may name a leader before that broker's replica acts as
		// one (KRaft publishes the metadata first); a produce then gets
		// NotLeaderOrFollower. ListOffsets is answered by the leader replica
		// itself, so its success means the partition takes writes.
		lo, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: offsets}})
		if err != nil {
			return 0, err
		}
		if got := len(lo.Topics[topic]); got != len(offsets) {
			return 0, fmt.Errorf("offsets of %d of %d partitions", got, len(offsets))
		}
		for _, po := range lo.Topics[topic] {
			if po.Error != nil {
				return 0, fmt.Errorf("partition %d: %w", po.Partition, po.Error)
			}
		}
		return len(t.Partitions), nil
	}
	return 0, fmt.Errorf("topic %s not in metadata yet", topic)
}
