package kafkaq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// kafkaTestConfig returns the Kafka config of a test producer on a fresh,
// not yet existing topic, deleted when the test ends.
func kafkaTestConfig(t testing.TB, brokers []string, partitions int) Settings {
	t.Helper()
	topic := testenv.Name(t, "jobs")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client := &kafka.Client{Addr: kafka.TCP(brokers...)}
		if _, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}}); err != nil {
			t.Logf("delete topic %s: %v", topic, err)
		}
	})
	return Settings{Brokers: brokers, Topic: topic, Partitions: partitions, ReplicationFactor: 1}
}

func newTestKafkaProducer(t testing.TB, cfg Settings, rdb redis.UniversalClient) *Producer {
	t.Helper()
	return newTestKafkaProducerWith(t, ProducerConfig{Kafka: cfg, Redis: rdb, Registerer: prometheus.NewRegistry()})
}

func newTestKafkaProducerWith(t testing.TB, cfg ProducerConfig) *Producer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewProducer(ctx, cfg)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// readTopic reads every message of every partition of topic, up to each
// partition's end, with plain partition readers.
func readTopic(t *testing.T, brokers []string, topic string, partitions int) map[int][]kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int][]kafka.Message{}
	for p := range partitions {
		conn, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, p)
		if err != nil {
			t.Fatalf("dial leader of %s/%d: %v", topic, p, err)
		}
		end, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatalf("last offset of %s/%d: %v", topic, p, err)
		}
		if end == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p, MaxWait: 250 * time.Millisecond})
		for {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("read %s/%d: %v", topic, p, err)
			}
			out[p] = append(out[p], m)
			if m.Offset == end-1 {
				break
			}
		}
		r.Close()
	}
	return out
}

func header(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func TestKafkaProducerCreatesTopic(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	cfg := kafkaTestConfig(t, brokers, 5)
	newTestKafkaProducer(t, cfg, nil)

	conn, err := kafka.Dial("tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions(cfg.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 5 {
		t.Fatalf("topic %s has %d partitions, want 5", cfg.Topic, len(parts))
	}
	// A second producer finds the topic there (TopicAlreadyExists is fine),
	// and a different partition count does not change it.
	cfg.Partitions = 3
	newTestKafkaProducer(t, cfg, nil)
}

func TestNewProducerRefusesBadSettings(t *testing.T) {
	t.Parallel()
	ok := Settings{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Partitions: 1, ReplicationFactor: 1}
	tests := []struct {
		name string
		edit func(*Settings)
	}{
		{"empty broker", func(c *Settings) { c.Brokers = []string{""} }},
		{"dlq topic is the topic", func(c *Settings) { c.DLQTopic = c.Topic }},
		{"negative partitions", func(c *Settings) { c.Partitions = -1 }},
		{"negative replication", func(c *Settings) { c.ReplicationFactor = -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			if _, err := NewProducer(context.Background(), ProducerConfig{Kafka: cfg}); err == nil {
				t.Errorf("NewProducer(%+v) = nil error, want one", cfg)
			}
		})
	}
	t.Run("broker down", func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := NewProducer(ctx, ProducerConfig{Kafka: ok})
		if !errors.Is(err, queue.ErrUnavailable) {
			t.Errorf("NewProducer on a closed port = %v, want queue.ErrUnavailable", err)
		}
		t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	})
}

func TestKafkaProducerRoundTrip(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	rdb := testenv.Redis(t)
	const partitions = 4
	cfg := kafkaTestConfig(t, brokers, partitions)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	p := newTestKafkaProducerWith(t, ProducerConfig{Kafka: cfg, Redis: rdb, Registerer: reg, Clock: testenv.NewClock(now)})

	tenants := []string{testenv.Name(t, "ka"), testenv.Name(t, "kb"), testenv.Name(t, "kc"), testenv.Name(t, "kd"), testenv.Name(t, "ke")}
	sent := map[string]queue.Envelope{}
	cost := map[string]int64{}
	ctx := context.Background()
	for call := range 3 {
		var jobs []queue.Envelope
		for i, tenant := range tenants {
			j := queuetest.Job(tenant, fmt.Sprintf("%s-%d", tenant, call), int64(i+1))
			jobs = append(jobs, j)
			sent[j.ID] = queuetest.Stored(now, j)[0]
			cost[tenant] += j.Cost
		}
		if err := p.Enqueue(ctx, jobs); err != nil {
			t.Fatalf("Enqueue call %d: %v", call, err)
		}
	}

	got := readTopic(t, brokers, cfg.Topic, partitions)
	partitionOf := map[string]int{}
	n := 0
	for part, msgs := range got {
		for _, m := range msgs {
			n++
			e, err := queue.Decode(m.Value)
			if err != nil {
				t.Fatalf("message at %d/%d does not decode: %v", part, m.Offset, err)
			}
			if diff := cmp.Diff(sent[e.ID], e); diff != "" {
				t.Errorf("job %s (-sent +read):\n%s", e.ID, diff)
			}
			if string(m.Key) != e.Tenant || header(m, HeaderTenant) != e.Tenant || header(m, HeaderJobID) != e.ID {
				t.Errorf("job %s: key %q, headers %v; want key and %s = %q, %s = %q", e.ID, m.Key, m.Headers, HeaderTenant, e.Tenant, HeaderJobID, e.ID)
			}
			if prev, seen := partitionOf[e.Tenant]; seen && prev != part {
				t.Errorf("tenant %s on partitions %d and %d, want one", e.Tenant, prev, part)
			}
			partitionOf[e.Tenant] = part
			want := (kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte(e.Tenant)}, 0, 1, 2, 3)
			if part != want {
				t.Errorf("tenant %s on partition %d, want %d (Java murmur2)", e.Tenant, part, want)
			}
		}
	}
	if n != len(sent) {
		t.Errorf("read %d messages, want %d", n, len(sent))
	}
	for tenant, want := range cost {
		got, err := rdb.Get(ctx, keys.Backlog(tenant)).Int64()
		if err != nil || got != want {
			t.Errorf("backlog of %s = %d, %v; want %d", tenant, got, err, want)
		}
		if ttl := rdb.PTTL(ctx, keys.Backlog(tenant)).Val(); ttl <= keys.BacklogTTL-time.Minute {
			t.Errorf("backlog TTL of %s = %v, want about %v", tenant, ttl, keys.BacklogTTL)
		}
	}
	if got := testenv.MetricValue(t, reg, "sluice_enqueued_jobs_total", map[string]string{"backend": "kafka"}); got != 15 {
		t.Errorf("sluice_enqueued_jobs_total{backend=kafka} = %v, want 15", got)
	}
}

// enqueueAtOnce starts one single-job Enqueue call per job, lets them all go
// at once, waits for them and fails t on an error; it returns how long they
// took.
func enqueueAtOnce(t *testing.T, p *Producer, jobs []queue.Envelope) time.Duration {
	t.Helper()
	gate := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(jobs))
	for _, job := range jobs {
		wg.Go(func() {
			<-gate
			if err := p.Enqueue(context.Background(), []queue.Envelope{job}); err != nil {
				errs <- err
			}
		})
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Enqueue: %v", err)
	}
	return time.Since(start)
}

// TestKafkaProducerSharesBatches starts 50 single-job Enqueue calls at once
// and checks with the producer's request counters that they went out in a
// few produce requests, not 50. The first request of a partition leaves at
// once (or, when its last request was shared, after the batch timeout);
// every call arriving meanwhile shares the next one.
func TestKafkaProducerSharesBatches(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	const partitions, calls = 3, 50
	for _, tt := range []struct {
		batchTimeout time.Duration
		maxRequests  int64
	}{
		// Two per partition when all calls arrive while the first request is
		// in flight; on a loaded machine stragglers that find their batch queue
		// idle add one each (3 to 11 seen), still far from one per call.
		{0, calls / 3},
		// The 100ms wait gathers the stragglers too (3 to 5 seen).
		{100 * time.Millisecond, 2 * partitions},
	} {
		t.Run(fmt.Sprintf("batch_timeout=%v", tt.batchTimeout), func(t *testing.T) {
			cfg := kafkaTestConfig(t, brokers, partitions)
			cfg.BatchTimeout = tt.batchTimeout
			p := newTestKafkaProducer(t, cfg, nil)
			tenants := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
			burst := func(round string) time.Duration {
				jobs := make([]queue.Envelope, calls)
				for i := range jobs {
					jobs[i] = queuetest.Job(tenants[i%len(tenants)], fmt.Sprintf("%s-%d", round, i), 1)
				}
				return enqueueAtOnce(t, p, jobs)
			}
			burst("warm") // dials the broker; every partition sees concurrent calls
			p.sender.requests.Store(0)
			p.sender.messages.Store(0)
			took := burst("measured")
			requests, messages := p.sender.requests.Load(), p.sender.messages.Load()
			t.Logf("%d calls in %v: %d produce requests, %d messages", calls, took, requests, messages)
			if messages != calls {
				t.Errorf("producer sent %d messages, want %d", messages, calls)
			}
			if requests > tt.maxRequests {
				t.Errorf("%d produce requests for %d concurrent calls, want <= %d (shared batches)", requests, calls, tt.maxRequests)
			}
		})
	}
}

// TestKafkaProducerLoneCallDoesNotWait: a call on a partition that has seen
// no concurrent calls is sent at once, not after the batch timeout.
func TestKafkaProducerLoneCallDoesNotWait(t *testing.T) {
	cfg := kafkaTestConfig(t, testenv.KafkaBrokers(t), 1)
	cfg.BatchTimeout = time.Minute
	cfg.ProduceTimeout = 10 * time.Second
	p := newTestKafkaProducer(t, cfg, nil)
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job("lone", fmt.Sprintf("j%d", i), 1)})
		cancel()
		if err != nil {
			t.Fatalf("call %d: Enqueue = %v; a lone call waited for the one-minute batch timeout", i, err)
		}
	}
}

func TestKafkaProducerInvalidJobs(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	p := newTestKafkaProducer(t, kafkaTestConfig(t, brokers, 1), nil)
	huge := queuetest.Job("t", "huge", 1)
	huge.Payload = []byte(`"` + strings.Repeat("x", 2<<20) + `"`)
	for name, jobs := range map[string][]queue.Envelope{
		"too large":   {queuetest.Job("t", "ok", 1), huge},
		"bad tenant":  {queuetest.Job("a b", "j", 1)},
		"cost 0":      {queuetest.Job("t", "j", 0)},
		"missing id":  {queuetest.Job("t", "", 1)},
		"bad version": {{ID: "j", Tenant: "t", Cost: 1, Version: 9}},
	} {
		err := p.Enqueue(context.Background(), jobs)
		if !errors.Is(err, queue.ErrInvalidJob) || errors.Is(err, queue.ErrUnavailable) {
			t.Errorf("%s: Enqueue = %v, want queue.ErrInvalidJob and not queue.ErrUnavailable", name, err)
		}
	}
	if n := p.sender.messages.Load(); n != 0 {
		t.Errorf("producer sent %d messages for refused calls, want 0", n)
	}
}
