package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// CreateTopic creates a fresh topic with the given number of partitions
// (replication factor 1) on the brokers, waits until every partition has a
// leader, and deletes the topic when the test ends. The brokers run with
// auto.create.topics.enable=false, so a test must create each topic it uses.
func CreateTopic(t testing.TB, brokers []string, partitions int) string {
	t.Helper()
	topic := Name(t, "topic")
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}},
	})
	if err != nil {
		t.Fatalf("testenv: create topic %s: %v", topic, err)
	}
	// Per-topic failures (TopicAlreadyExists, InvalidReplicationFactor...) are
	// reported here, not in err.
	if err := resp.Errors[topic]; err != nil {
		t.Fatalf("testenv: create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
		if err == nil {
			err = resp.Errors[topic]
		}
		if err != nil {
			t.Logf("testenv: delete topic %s: %v", topic, err)
		}
	})

	for {
		err := topicReady(ctx, client, topic, partitions)
		if err == nil {
			return topic
		}
		if ctx.Err() != nil {
			t.Fatalf("testenv: topic %s not ready: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// topicReady returns nil once the metadata lists the topic with all its
// partitions led by a broker.
func topicReady(ctx context.Context, client *kafka.Client, topic string, partitions int) error {
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return err
	}
	for _, tp := range md.Topics {
		if tp.Name != topic {
			continue
		}
		if tp.Error != nil {
			return tp.Error
		}
		if len(tp.Partitions) != partitions {
			return fmt.Errorf("%d of %d partitions", len(tp.Partitions), partitions)
		}
		for _, p := range tp.Partitions {
			if p.Error != nil {
				return fmt.Errorf("partition %d: %w", p.ID, p.Error)
			}
			if p.Leader.Host == "" {
				return fmt.Errorf("partition %d: no leader", p.ID)
			}
		}
		return nil
	}
	return fmt.Errorf("not in metadata")
}
