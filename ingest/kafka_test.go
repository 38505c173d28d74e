package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// kafkaConfig is testConfig with the Kafka queue backend.
func kafkaConfig(t *testing.T, brokers []string, topic string, tenants ...string) *config.Config {
	cfg := testConfig(t, tenants...)
	cfg.Queue.Backend = "kafka"
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.Topic = topic
	return cfg
}

// kafkaProducer returns a producer on a fresh one-partition topic of
// brokers, closed when the test ends.
func kafkaProducer(t *testing.T, brokers []string) (*kafkaq.Producer, string) {
	t.Helper()
	topic := testenv.CreateTopic(t, brokers, 1)
	p, err := kafkaq.NewProducer(t.Context(), kafkaq.ProducerConfig{Kafka: kafkaq.Settings{
		Brokers: brokers, Topic: topic, Partitions: 1, ReplicationFactor: 1,
		BatchTimeout: 2 * time.Millisecond, ProduceTimeout: 2 * time.Second,
	}, Redis: testenv.Redis(t)})
	if err != nil {
		t.Fatalf("kafka producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, topic
}

// topicJobs reads every job on partition 0 of topic, by id, waiting up to
// 10s for at least want of them.
func topicJobs(t *testing.T, brokers []string, topic string, want int) map[string]queue.Envelope {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 200 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]queue.Envelope{}
	for len(out) < want {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s after %d jobs: %v", topic, len(out), err)
		}
		e, err := queue.Decode(m.Value)
		if err != nil {
			t.Fatalf("message at offset %d: %v", m.Offset, err)
		}
		out[e.ID] = e
	}
	// Anything else already on the partition (a job that should not be
	// there) arrives within one more short read.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	for {
		m, err := r.ReadMessage(ctx2)
		if errors.Is(err, context.DeadlineExceeded) {
			return out
		}
		if err != nil {
			t.Fatalf("read %s: %v", topic, err)
		}
		if e, err := queue.Decode(m.Value); err == nil {
			out[e.ID] = e
		}
	}
}

// TestKafkaAccepted submits to the shared broker and reads the job back: the
// 202 came after the job was on the topic.
func TestKafkaAccepted(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	producer, topic := kafkaProducer(t, brokers)
	tenant := testenv.Name(t, "kafka")
	h := startIngest(t, kafkaConfig(t, brokers, topic, tenantYAML(tenant, "")), deps{rdb: testenv.Redis(t), producer: producer})

	a := h.post(t, tenant, "/v1/jobs", `{"type":"encode","payload":{"video":42},"cost":2}`)
	if a.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	id, _ := a.json(t)["job_id"].(string)
	jobs := topicJobs(t, brokers, topic, 1)
	e, ok := jobs[id]
	if !ok || e.Tenant != tenant || e.Type != "encode" || string(e.Payload) != `{"video":42}` || e.Cost != 2 {
		t.Errorf("job %s on the topic: %+v (found %v), want tenant %s, type encode, payload, cost 2", id, e, ok, tenant)
	}
}

// TestKafkaScheduledTooLarge: on Kafka a scheduled job larger than a produce
// request takes (within max_body_bytes) is a 422 at submission, as the same
// job unscheduled is, and nothing is stored for it: stored, it would only
// be refused when due.
func TestKafkaScheduledTooLarge(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	producer, topic := kafkaProducer(t, brokers)
	tenant := testenv.Name(t, "kbig")
	rdb := testenv.Redis(t)
	cfg := kafkaConfig(t, brokers, topic, tenantYAML(tenant, ""))
	cfg.Ingest.MaxBodyBytes = 1 << 20 // the default
	h := startIngest(t, cfg, deps{rdb: rdb, producer: producer})
	big := `{"type":"t","payload":"` + strings.Repeat("x", 1_010_000) + `"%s}`
	for _, c := range []struct{ name, extra string }{{"now", ""}, {"delayed", `,"delay":"1h"`}} {
		a := h.post(t, tenant, "/v1/jobs", fmt.Sprintf(big, c.extra))
		if a.status != http.StatusUnprocessableEntity || !strings.Contains(string(a.body), "more than a Kafka request takes") {
			t.Errorf("%s: %d %.300s, want 422, more than a Kafka request takes", c.name, a.status, a.body)
		}
	}
	if n := rdb.HLen(context.Background(), keys.ScheduledJobs(tenant)).Val(); n != 0 {
		t.Errorf("%d scheduled jobs stored for the refused request, want 0", n)
	}
	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","payload":{},"delay":"1h"}`); a.status != http.StatusAccepted {
		t.Errorf("a small scheduled job: %d %s, want 202", a.status, a.body)
	}
}

// TestKafkaDown stops a private broker in the middle of the test: submissions
// get 503 + Retry-After naming kafka and none of them reaches the topic; once
// the broker is back, submissions get 202 again, without restarting ingest.
func TestKafkaDown(t *testing.T) {
	t.Parallel()
	broker := testenv.StartKafka(t)
	producer, topic := kafkaProducer(t, broker.Brokers())
	tenant := testenv.Name(t, "kdown")
	h := startIngest(t, kafkaConfig(t, broker.Brokers(), topic, tenantYAML(tenant, "")), deps{rdb: testenv.Redis(t), producer: producer})
	if a := h.request(t, "GET", "/readyz", "", "", ""); a.status != 200 {
		t.Errorf("/readyz with the broker up: %d %s", a.status, a.body)
	}

	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"before"}`); a.status != 202 {
		t.Fatalf("broker up: %d %s", a.status, a.body)
	}

	broker.Stop()
	for _, id := range []string{"down-1", "down-2"} {
		start := time.Now()
		a := h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"`+id+`"}`)
		if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "2" || a.json(t)["backend"] != "kafka" {
			t.Fatalf("broker down, %s: status %d, Retry-After %q, body %s; want 503, 2, backend kafka",
				id, a.status, a.header.Get("Retry-After"), a.body)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("503 took %v, want about the 2s produce timeout", d)
		}
	}

	if a := h.request(t, "GET", "/readyz", "", "", ""); a.status != 503 || !strings.Contains(string(a.body), `"queue":"kafka `) {
		t.Errorf("/readyz with the broker down: %d %s, want 503 naming the queue", a.status, a.body)
	}

	broker.Start()
	testenv.WaitFor(t, 60*time.Second, "202 after the broker restarted", func() bool {
		return h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"after"}`).status == http.StatusAccepted
	})
	jobs := topicJobs(t, broker.Brokers(), topic, 2)
	for _, id := range []string{"before", "after"} {
		if _, ok := jobs[id]; !ok {
			t.Errorf("accepted job %s is not on the topic", id)
		}
	}
	for _, id := range []string{"down-1", "down-2"} {
		if _, ok := jobs[id]; ok {
			t.Errorf("job %s, answered 503, is on the topic", id)
		}
	}
}
