package kafkaq_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// TestTopicReplication: the auto replication factor is min(3, brokers) and
// the auto min.insync.replicas 2 from 3 replicas on; a min.insync.replicas
// above the replication factor is an error.
func TestTopicReplication(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rf, isr, brokers int
		wantRF, wantISR  int
		wantErr          string
	}{
		{0, 0, 1, 1, 0, ""},
		{0, 0, 2, 2, 0, ""},
		{0, 0, 3, 3, 2, ""},
		{0, 0, 5, 3, 2, ""},
		{0, 0, 0, 1, 0, ""},
		{5, 0, 5, 5, 2, ""},
		{2, 2, 3, 2, 2, ""},
		{0, 3, 5, 3, 3, ""},
		{0, 2, 1, 1, 2, "kafka.min_insync_replicas 2 is more than the replication factor 1"},
		{3, 1, 3, 3, 1, ""},
	} {
		rf, isr, err := kafkaq.TopicSpec{ReplicationFactor: c.rf, MinInsyncReplicas: c.isr}.Replication(c.brokers)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if rf != c.wantRF || isr != c.wantISR || !strings.Contains(gotErr, c.wantErr) || (c.wantErr == "") != (err == nil) {
			t.Errorf("rf %d, min isr %d, %d brokers: got %d, %d, %v; want %d, %d, %q",
				c.rf, c.isr, c.brokers, rf, isr, err, c.wantRF, c.wantISR, c.wantErr)
		}
	}
}

// TestEnsureTopicKeepsFewerReplicas: an existing topic with fewer replicas
// than configured is kept, with a warning naming both counts.
func TestEnsureTopicKeepsFewerReplicas(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.CreateTopic(t, brokers, 1) // replication factor 1
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := kafkaq.EnsureTopic(ctx, client, kafkaq.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: len(brokers) + 1}, log); err != nil {
		t.Fatalf("EnsureTopic on an existing topic: %v", err)
	}
	if got := buf.String(); !strings.Contains(got, "fewer replicas than configured") ||
		!strings.Contains(got, "replication_factor=1 configured_replication_factor=") {
		t.Errorf("log = %q, want a warning with replication_factor=1 and the configured one", got)
	}
}

// TestEnsureTopicWarnsMinISR: an existing topic whose min.insync.replicas is
// above its replicas is kept with a warning naming both; a
// kafka.min_insync_replicas above the topic's replicas is an error naming
// the key.
func TestEnsureTopicWarnsMinISR(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	topic := testenv.Name(t, "isr")
	res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "min.insync.replicas", ConfigValue: "2"}}}}})
	if err != nil || res.Errors[topic] != nil {
		t.Fatalf("create %s: %v %v", topic, err, res)
	}
	t.Cleanup(func() { client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic}}) })
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	if err := kafkaq.EnsureTopic(ctx, client, kafkaq.TopicSpec{Name: topic, Partitions: 1}, log); err != nil {
		t.Fatalf("EnsureTopic on an existing topic: %v", err)
	}
	if got := buf.String(); !strings.Contains(got, "min.insync.replicas is more than its replicas") ||
		!strings.Contains(got, "min_insync_replicas=2 replication_factor=1") {
		t.Errorf("log = %q, want a warning with min_insync_replicas=2 replication_factor=1", got)
	}
	err = kafkaq.EnsureTopic(ctx, client, kafkaq.TopicSpec{Name: topic, Partitions: 1, MinInsyncReplicas: 2}, log)
	if err == nil || !strings.Contains(err.Error(), "kafka.min_insync_replicas 2 is more than the topic's 1 replicas") {
		t.Errorf("EnsureTopic with kafka.min_insync_replicas 2 on 1 replica = %v, want an error naming the key", err)
	}
}

// TestEnsureTopicAutoOnCluster: on a 3-node cluster an auto replication
// factor is the brokers' default (3, not the brokers registered at that
// moment), and the auto min.insync.replicas 2 is set on the created topic.
func TestEnsureTopicAutoOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node Kafka cluster")
	}
	c := testenv.StartKafkaCluster(t, 3)
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers()...), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	topic := testenv.Name(t, "auto")
	if err := kafkaq.EnsureTopic(ctx, client, kafkaq.TopicSpec{Name: topic, Partitions: 2}, nil); err != nil {
		t.Fatal(err)
	}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(md.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	for _, p := range md.Topics[0].Partitions {
		if len(p.Replicas) != 3 {
			t.Errorf("partition %d has %d replicas, want 3", p.ID, len(p.Replicas))
		}
	}
	// The alteration is acknowledged by the controller; a broker answering
	// DescribeConfigs may see it a moment later (KRaft metadata is
	// propagated to each broker): wait for it.
	var res *kafka.DescribeConfigsResponse
	testenv.WaitFor(t, 10*time.Second, "min.insync.replicas 2 on "+topic, func() bool {
		res, err = client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"min.insync.replicas"}}}})
		return err == nil && len(res.Resources) == 1 && len(res.Resources[0].ConfigEntries) == 1 &&
			res.Resources[0].ConfigEntries[0].ConfigValue == "2"
	})
}
