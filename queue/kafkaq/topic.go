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
	// ReplicationFactor: 0 (auto) creates the topic with the brokers'
	// default.replication.factor (CreateTopics with -1), which
	// deploy/local/services.sh sets to min(3, brokers): a topic created
	// while a cluster is still starting gets the cluster's factor, not the
	// brokers registered at that moment (a create the live brokers cannot
	// place fails, wrapping queue.ErrUnavailable, and the start is retried).
	ReplicationFactor int
	// MinInsyncReplicas becomes the topic's min.insync.replicas, the
	// replicas an acks=all write must reach (fewer: NOT_ENOUGH_REPLICAS,
	// which Enqueue returns as queue.ErrUnavailable, a 503). 0 is 2 when the
	// topic has 3 or more replicas (with an auto replication factor, set
	// once the created topic's replicas are known), else the broker's
	// default (not set on the topic). At most the replication factor.
	MinInsyncReplicas int
}

// Replication resolves the spec's auto values for a cluster of brokers
// nodes: the replication factor (0: min(3, brokers), what the shipped
// brokers' default.replication.factor gives), and the min.insync.replicas
// to set on the topic (0: leave the broker's default). It fails when
// min.insync.replicas exceeds the replication factor.
func (s TopicSpec) Replication(brokers int) (rf, minISR int, err error) {
	rf, minISR = s.ReplicationFactor, s.MinInsyncReplicas
	if rf == 0 {
		rf = max(1, min(autoReplicas, brokers))
	}
	if minISR == 0 && rf >= 3 {
		minISR = 2
	}
	if minISR > rf {
		err = fmt.Errorf("kafka.min_insync_replicas %d is more than the replication factor %d (kafka.replication_factor %d, 0 = min(3, brokers); %d brokers)",
			minISR, rf, s.ReplicationFactor, brokers)
	}
	return rf, minISR, err
}

// EnsureTopic creates the topic of spec when it does not exist (an auto
// replication factor is the brokers' default; TopicSpec), then waits until
// every partition of the topic has a leader that serves it, so the first
// produce does not fail with LeaderNotAvailable or NotLeaderOrFollower. A
// topic it created with an auto replication factor and auto
// min.insync.replicas gets min.insync.replicas 2 once it is known to have 3
// or more replicas (IncrementalAlterConfigs). An existing topic is left as
// it is: a partition count other than spec's, fewer replicas than
// min(3, brokers) (auto) or the configured factor, or a min.insync.replicas
// other than spec's (DescribeConfigs) is logged as a warning. A
// kafka.min_insync_replicas above the topic's replicas is an error. The
// wait is bounded by ctx and by 30s. log may be nil. Errors reaching the
// cluster wrap queue.ErrUnavailable.
func EnsureTopic(ctx context.Context, client *kafka.Client, spec TopicSpec, log *slog.Logger) error {
	topic := spec.Name
	if spec.ReplicationFactor > 0 {
		if _, _, err := spec.Replication(0); err != nil {
			return fmt.Errorf("queue: kafka topic %s: %w", topic, err)
		}
	}
	created, err := createTopic(ctx, client, spec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, topicReadyTimeout)
	defer cancel()
	for {
		layout, err := leadersReady(ctx, client, topic)
		if err == nil {
			return settle(ctx, client, spec, layout, created, log)
		}
		select {
		case <-ctx.Done():
			return queue.Unavailable("kafka wait for leaders of "+topic, fmt.Errorf("%w (last: %w)", ctx.Err(), err))
		case <-time.After(topicPollInterval):
		}
	}
}

// createTopic sends CreateTopics for spec: created is false when the topic
// existed.
func createTopic(ctx context.Context, client *kafka.Client, spec TopicSpec) (created bool, err error) {
	topic := spec.Name
	rf := spec.ReplicationFactor
	if rf == 0 {
		rf = -1 // the brokers' default.replication.factor (CreateTopics v4+)
	}
	_, minISR, _ := spec.Replication(rf)
	tc := kafka.TopicConfig{Topic: topic, NumPartitions: spec.Partitions, ReplicationFactor: rf}
	if minISR > 0 {
		tc.ConfigEntries = []kafka.ConfigEntry{{ConfigName: "min.insync.replicas", ConfigValue: strconv.Itoa(minISR)}}
	}
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err != nil {
		return false, queue.Unavailable("kafka create topic "+topic, err)
	}
	terr := resp.Errors[topic]
	switch {
	case terr == nil:
		return true, nil
	case errors.Is(terr, kafka.TopicAlreadyExists):
		return false, nil
	case errors.Is(terr, kafka.InvalidReplicationFactor) && spec.ReplicationFactor == 0:
		// Fewer brokers up than default.replication.factor: a cluster
		// still starting, or down to a minority.
		return false, queue.Unavailable("kafka create topic "+topic+" with the brokers' default replication factor", terr)
	}
	return false, fmt.Errorf("queue: kafka create topic %s (%d partitions, replication %d, min.insync.replicas %d): %w",
		topic, spec.Partitions, rf, minISR, terr)
}

// settle checks the ready topic against spec: an auto min.insync.replicas
// of a topic it created with an auto replication factor is set from its
// replicas; what differs from spec is logged (warnLayout); a
// kafka.min_insync_replicas above the replicas is an error.
func settle(ctx context.Context, client *kafka.Client, spec TopicSpec, layout topicLayout, created bool, log *slog.Logger) error {
	topic := spec.Name
	want, wantISR, _ := spec.Replication(layout.brokers)
	if spec.ReplicationFactor == 0 {
		_, wantISR, _ = spec.Replication(layout.minReplicas)
	}
	if spec.MinInsyncReplicas > layout.minReplicas {
		return fmt.Errorf("queue: kafka topic %s: kafka.min_insync_replicas %d is more than the topic's %d replicas (every write would fail)",
			topic, spec.MinInsyncReplicas, layout.minReplicas)
	}
	if created && spec.ReplicationFactor == 0 && spec.MinInsyncReplicas == 0 && wantISR > 0 {
		if err := setMinISR(ctx, client, topic, wantISR); err != nil {
			return queue.Unavailable("kafka set min.insync.replicas of "+topic, err)
		}
	}
	if created || log == nil {
		return nil
	}
	isr, err := topicMinISR(ctx, client, topic)
	if err != nil {
		log.Warn("kafka topic's min.insync.replicas unknown", "topic", topic, "err", err)
	}
	warnLayout(log, spec, want, wantISR, layout, isr)
	return nil
}

// setMinISR sets topic's min.insync.replicas to n.
func setMinISR(ctx context.Context, client *kafka.Client, topic string, n int) error {
	res, err := client.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.IncrementalAlterConfigsRequestConfig{{
				Name: "min.insync.replicas", Value: strconv.Itoa(n), ConfigOperation: kafka.ConfigOperationSet,
			}},
		}},
	})
	if err != nil {
		return err
	}
	for _, r := range res.Resources {
		if r.Error != nil {
			return r.Error
		}
	}
	return nil
}

// topicMinISR reads topic's min.insync.replicas in effect (its own or the
// broker's default; DescribeConfigs).
func topicMinISR(ctx context.Context, client *kafka.Client, topic string) (int, error) {
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"min.insync.replicas"},
	}}})
	if err != nil {
		return 0, err
	}
	for _, r := range res.Resources {
		if r.Error != nil {
			return 0, r.Error
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "min.insync.replicas" {
				return strconv.Atoi(e.ConfigValue)
			}
		}
	}
	return 0, fmt.Errorf("no min.insync.replicas in the topic's configs")
}

// topicLayout is what the metadata says of a ready topic.
type topicLayout struct {
	partitions  int
	minReplicas int // the fewest replicas of any partition
	brokers     int // the brokers in the metadata
}

// warnLayout logs an existing topic whose partitions, replicas (fewer than
// rf) or min.insync.replicas (isr; 0: unknown) differ from what sluice
// would create (wantISR; 0: the broker's default, not checked).
func warnLayout(log *slog.Logger, spec TopicSpec, rf, wantISR int, got topicLayout, isr int) {
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
	switch {
	case isr > got.minReplicas:
		log.Warn("kafka topic's min.insync.replicas is more than its replicas: every write fails; lower it (kafka-configs --alter)",
			"topic", spec.Name, "min_insync_replicas", isr, "replication_factor", got.minReplicas)
	case isr > 0 && wantISR > 0 && isr != wantISR:
		log.Warn("kafka topic exists with another min.insync.replicas than configured; keeping it (kafka-configs --alter)",
			"topic", spec.Name, "min_insync_replicas", isr, "configured_min_insync_replicas", wantISR)
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
		layout := topicLayout{partitions: len(t.Partitions), minReplicas: len(t.Partitions[0].Replicas), brokers: len(md.Brokers)}
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
