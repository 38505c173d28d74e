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
		{0, 2, 1, 1, 2, "min.insync.replicas 2 is more than the replication factor 1"},
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
