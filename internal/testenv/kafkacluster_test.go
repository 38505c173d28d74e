package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestStartKafkaCluster starts 3 nodes, creates a topic replicated 3 times
// and checks that a write acknowledged by all replicas survives a SIGKILL of
// the partition's leader and of the active controller, that both move to
// another node, and that Pause/Resume freeze and thaw a node.
func TestStartKafkaCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node Kafka cluster (≈25 s)")
	}
	c := StartKafkaCluster(t, 3)
	topic := Name(t, "topic")
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers()...), Timeout: 10 * time.Second}
	resp, err := client.CreateTopics(t.Context(), &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: 3}},
	})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	write := func(v string) {
		t.Helper()
		w := &kafka.Writer{Addr: kafka.TCP(c.Brokers()...), Topic: topic, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
		defer w.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(v)}); err != nil {
			t.Fatalf("write %s: %v", v, err)
		}
	}
	var leader int
	WaitFor(t, 30*time.Second, "a leader of partition 0", func() bool { leader = c.LeaderOf(topic, 0); return leader >= 0 })
	write("a")

	c.Node(leader).Kill()
	WaitFor(t, 30*time.Second, "a new leader of partition 0", func() bool {
		l := c.LeaderOf(topic, 0)
		return l >= 0 && l != leader
	})
	write("b")
	c.StartNodes(leader)

	ctl := c.ActiveController()
	if ctl < 0 {
		t.Fatalf("no active controller")
	}
	c.Node(ctl).Kill()
	WaitFor(t, 30*time.Second, "a new active controller", func() bool {
		n := c.ActiveController()
		return n >= 0 && n != ctl
	})
	write("c")
	c.StartNodes(ctl)

	p := c.Node(0)
	p.Pause()
	p.Resume()
	write("d")

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Brokers(), Topic: topic, MaxWait: 250 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, want := range []string{"a", "b", "c", "d"} {
		m, err := r.ReadMessage(ctx)
		if err != nil || string(m.Value) != want {
			t.Fatalf("read: %q, %v; want %q", m.Value, err, want)
		}
	}
}
