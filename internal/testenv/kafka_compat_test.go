package testenv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"
)

// The tests in this file prove that the kafka-go version in go.mod works with
// the broker that deploy/local/services.sh runs (Apache Kafka 4.x, see
// docs/adr/0001-kafka-version.md) for everything sluice needs: explicit topic
// creation, producing with acks=all, and consuming in a consumer group with
// explicit commits, through both kafka.Reader and the kafka.ConsumerGroup API.
// Kafka 4.0 removed old protocol versions (KIP-896); kafka-go before v0.4.48
// fails to join a group there.

const compatMessages = 30

// compatTopic creates a 3-partition topic on the shared broker, produces
// compatMessages keyed messages with RequiredAcks=all, and returns the topic
// and the end offset of each partition.
func compatTopic(t *testing.T) (brokers []string, topic string, ends map[int]int64) {
	t.Helper()
	brokers = KafkaBrokers(t)
	topic = CreateTopic(t, brokers, 3)
	produce(t, brokers, topic, 0, compatMessages)
	return brokers, topic, endOffsets(t, brokers, topic, 3)
}

// produce writes messages job-from..job-(to-1), keyed by five tenants, with
// acks=all; WriteMessages returns only after the broker acknowledged them.
func produce(t *testing.T, brokers []string, topic string, from, to int) {
	t.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		RequiredAcks: kafka.RequireAll,
		Balancer:     &kafka.Hash{},
		BatchTimeout: 5 * time.Millisecond,
	}
	defer w.Close()
	var msgs []kafka.Message
	for i := from; i < to; i++ {
		msgs = append(msgs, kafka.Message{
			Key:   fmt.Appendf(nil, "tenant-%d", i%5),
			Value: fmt.Appendf(nil, "job-%d", i),
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("produce to %s with acks=all: %v", topic, err)
	}
}

// endOffsets returns the log end offset of each partition of topic.
func endOffsets(t *testing.T, brokers []string, topic string, partitions int) map[int]int64 {
	t.Helper()
	var reqs []kafka.OffsetRequest
	for p := range partitions {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	resp, err := client.ListOffsets(t.Context(), &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	ends := map[int]int64{}
	var total int64
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("list offsets of %s/%d: %v", topic, p.Partition, p.Error)
		}
		ends[p.Partition] = p.LastOffset
		total += p.LastOffset
	}
	if total != compatMessages {
		t.Fatalf("end offsets of %s add up to %d, want %d (%v)", topic, total, compatMessages, ends)
	}
	return ends
}

// committed returns the group's committed offset of each partition of topic.
func committed(t *testing.T, brokers []string, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	resp, err := client.OffsetFetch(t.Context(), &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err == nil {
		err = resp.Error
	}
	if err != nil {
		t.Fatalf("offset fetch of group %s: %v", group, err)
	}
	got := map[int]int64{}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("offset fetch of group %s, %s/%d: %v", group, topic, p.Partition, p.Error)
		}
		got[p.Partition] = p.CommittedOffset
	}
	return got
}

func jobNames(from, to int) map[string]bool {
	m := map[string]bool{}
	for i := from; i < to; i++ {
		m[fmt.Sprintf("job-%d", i)] = true
	}
	return m
}

// TestKafkaCompatReader consumes with kafka.NewReader in a consumer group:
// FetchMessage, then CommitMessages (synchronous with CommitInterval 0). The
// committed offsets must equal the end offsets, and a new reader of the same
// group must resume after them, receiving only what was produced later.
func TestKafkaCompatReader(t *testing.T) {
	brokers, topic, ends := compatTopic(t)
	group := Name(t, "group")
	newReader := func() *kafka.Reader {
		return kafka.NewReader(kafka.ReaderConfig{
			Brokers: brokers, GroupID: group, Topic: topic,
			MaxWait: 250 * time.Millisecond, StartOffset: kafka.FirstOffset,
		})
	}
	read := func(r *kafka.Reader, n int) map[string]bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		got := map[string]bool{}
		for len(got) < n {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("fetch after %d of %d messages: %v", len(got), n, err)
			}
			got[string(m.Value)] = true
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatalf("commit %s/%d@%d: %v", m.Topic, m.Partition, m.Offset, err)
			}
		}
		return got
	}

	r := newReader()
	got := read(r, compatMessages)
	if err := r.Close(); err != nil {
		t.Fatalf("close reader: %v", err)
	}
	if diff := cmp.Diff(jobNames(0, compatMessages), got); diff != "" {
		t.Errorf("consumed messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ends, committed(t, brokers, group, topic, 3)); diff != "" {
		t.Errorf("committed offsets (-want end offsets +got):\n%s", diff)
	}

	produce(t, brokers, topic, compatMessages, compatMessages+3)
	r = newReader()
	defer r.Close()
	if diff := cmp.Diff(jobNames(compatMessages, compatMessages+3), read(r, 3)); diff != "" {
		t.Errorf("after rejoining the group (-want +got):\n%s", diff)
	}
}

// TestKafkaCompatConsumerGroup consumes with the kafka.ConsumerGroup API as
// its example does: Next, one Start per assigned partition reading with a
// partition reader from the assigned offset, and CommitOffsets.
func TestKafkaCompatConsumerGroup(t *testing.T) {
	brokers, topic, ends := compatTopic(t)
	groupID := Name(t, "group")
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: groupID, Brokers: brokers, Topics: []string{topic},
		StartOffset: kafka.FirstOffset,
	})
	if err != nil {
		t.Fatalf("new consumer group: %v", err)
	}
	defer group.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	gen, err := group.Next(ctx)
	if err != nil {
		t.Fatalf("join consumer group %s: %v", groupID, err)
	}
	assigned := gen.Assignments[topic]
	if len(assigned) != 3 {
		t.Fatalf("assigned %d partitions of %s, want all 3: %+v", len(assigned), topic, assigned)
	}

	var (
		mu   sync.Mutex
		got  = map[string]bool{}
		errs []error
		wg   sync.WaitGroup
	)
	for _, a := range assigned {
		wg.Add(1)
		gen.Start(func(genCtx context.Context) {
			// A Start func that returns ends the generation, so each one waits
			// for the generation to end after finishing its partition.
			defer func() { <-genCtx.Done() }()
			defer wg.Done()
			err := consumePartition(ctx, gen, brokers, topic, a, ends[a.ID], func(v string) {
				mu.Lock()
				got[v] = true
				mu.Unlock()
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobNames(0, compatMessages), got); diff != "" {
		t.Errorf("consumed messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ends, committed(t, brokers, groupID, topic, 3)); diff != "" {
		t.Errorf("committed offsets (-want end offsets +got):\n%s", diff)
	}
}

// consumePartition reads partition a from its assigned offset up to end,
// passes each value to seen, and commits end.
func consumePartition(ctx context.Context, gen *kafka.Generation, brokers []string, topic string,
	a kafka.PartitionAssignment, end int64, seen func(string)) error {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: brokers, Topic: topic, Partition: a.ID, MaxWait: 250 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(a.Offset); err != nil {
		return fmt.Errorf("partition %d: set offset %d: %w", a.ID, a.Offset, err)
	}
	for next := int64(0); next < end; {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return fmt.Errorf("partition %d: read at %d of %d: %w", a.ID, next, end, err)
		}
		seen(string(m.Value))
		next = m.Offset + 1
	}
	if err := gen.CommitOffsets(map[string]map[int]int64{topic: {a.ID: end}}); err != nil {
		return fmt.Errorf("partition %d: commit %d: %w", a.ID, end, err)
	}
	return nil
}

// TestKafkaNoAutoCreate checks the broker setting the tests rely on: producing
// to a topic nobody created fails instead of creating it.
func TestKafkaNoAutoCreate(t *testing.T) {
	brokers := KafkaBrokers(t)
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: Name(t, "missing"), RequiredAcks: kafka.RequireAll, MaxAttempts: 1}
	defer w.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := w.WriteMessages(ctx, kafka.Message{Value: []byte("x")})
	if !errors.Is(err, kafka.UnknownTopicOrPartition) {
		t.Fatalf("write to a missing topic: got %v, want %v", err, kafka.UnknownTopicOrPartition)
	}
}
