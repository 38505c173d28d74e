package kafkaq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// kafkaEnv is one test's Kafka: a fresh job topic with its partitions and
// a fresh DLQ topic (both deleted when the test ends), a fresh consumer
// group, and the shared Redis for backlog counters.
type kafkaEnv struct {
	t       testing.TB
	cfg     kafkaq.Settings
	rdb     *redis.Client
	client  *kafka.Client
	produce *kafkaq.Producer
}

func newKafkaEnv(t testing.TB, partitions int) *kafkaEnv {
	t.Helper()
	brokers := testenv.KafkaBrokers(t)
	cfg := kafkaq.Settings{
		Brokers: brokers, Topic: testenv.Name(t, "jobs"), DLQTopic: testenv.Name(t, "dlq"),
		Partitions: partitions, ReplicationFactor: 1, ConsumerGroup: testenv.Name(t, "group"),
	}
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{cfg.Topic, cfg.DLQTopic}}); err != nil {
			t.Logf("delete topics: %v", err)
		}
	})
	e := &kafkaEnv{t: t, cfg: cfg, rdb: testenv.Redis(t), client: client}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := kafkaq.NewProducer(ctx, kafkaq.ProducerConfig{Kafka: cfg, Redis: e.rdb, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	e.produce = p
	return e
}

// enqueue produces jobs (ids tenant-from .. tenant-to-1) in calls of at
// most 1,000 jobs.
func (e *kafkaEnv) enqueue(tenant string, from, to int) {
	e.t.Helper()
	for start := from; start < to; start += 1000 {
		var jobs []queue.Envelope
		for i := start; i < min(to, start+1000); i++ {
			jobs = append(jobs, queue.Envelope{ID: jobID(tenant, i), Tenant: tenant, Type: "t", Cost: 1, Payload: []byte(`{}`)})
		}
		if err := e.produce.Enqueue(context.Background(), jobs); err != nil {
			e.t.Fatalf("enqueue %s %d..%d: %v", tenant, start, min(to, start+1000), err)
		}
	}
}

func jobID(tenant string, i int) string { return fmt.Sprintf("%s-%06d", tenant, i) }

// consumerConfig is a consumer of e's topic with test timings: quick
// commits, the broker's shortest session, a short revoke wait.
func (e *kafkaEnv) consumerConfig() kafkaq.ConsumerConfig {
	return kafkaq.ConsumerConfig{
		Kafka: e.cfg, CommitInterval: 100 * time.Millisecond, FetchMaxWait: 250 * time.Millisecond,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: 300 * time.Millisecond,
		RebalanceTimeout: 10 * time.Second, RevokeTimeout: 2 * time.Second,
	}
}

// consumer builds a consumer (on e's Redis unless cfg names one) and runs
// it until stop (or the test's end).
func (e *kafkaEnv) consumer(cfg kafkaq.ConsumerConfig, reg prometheus.Registerer) (c *kafkaq.Consumer, stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if cfg.Redis == nil {
		cfg.Redis = e.rdb
	}
	cfg.Registerer, cfg.Logger = reg, testLogger()
	c, err := kafkaq.NewConsumer(ctx, cfg)
	if err != nil {
		e.t.Fatalf("NewConsumer: %v", err)
	}
	runCtx, cancelRun := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancelRun()
			if err := <-done; err != nil {
				e.t.Errorf("consumer Run: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return c, stop
}

// committed returns the group's committed offset of each partition (-1 when
// none).
func (e *kafkaEnv) committed(partitions int) map[int]int64 {
	e.t.Helper()
	ids := make([]int, partitions)
	for i := range ids {
		ids[i] = i
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := e.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: e.cfg.ConsumerGroup, Topics: map[string][]int{e.cfg.Topic: ids}})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		e.t.Fatalf("offset fetch: %v", err)
	}
	out := map[int]int64{}
	for _, p := range res.Topics[e.cfg.Topic] {
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// endOffsets returns each partition's high watermark.
func (e *kafkaEnv) endOffsets(topic string, partitions int) map[int]int64 {
	e.t.Helper()
	var ask []kafka.OffsetRequest
	for i := 0; i < partitions; i++ {
		ask = append(ask, kafka.LastOffsetOf(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := e.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: ask}})
	if err != nil {
		e.t.Fatalf("list offsets: %v", err)
	}
	out := map[int]int64{}
	for _, p := range res.Topics[topic] {
		out[p.Partition] = p.LastOffset
	}
	return out
}

// readAll reads every message of topic up to its end offsets.
func (e *kafkaEnv) readAll(topic string, partitions int) []kafka.Message {
	e.t.Helper()
	var out []kafka.Message
	ends := e.endOffsets(topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for p := 0; p < partitions; p++ {
		if ends[p] == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: e.cfg.Brokers, Topic: topic, Partition: p, MaxWait: 250 * time.Millisecond})
		for {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				r.Close()
				e.t.Fatalf("read %s/%d: %v", topic, p, err)
			}
			out = append(out, m)
			if m.Offset >= ends[p]-1 {
				break
			}
		}
		r.Close()
	}
	return out
}

// deliveries counts a Handler's deliveries per job id.
type deliveries struct {
	mu    sync.Mutex
	seen  map[string]int
	first map[string]time.Time
	total int
}

func newDeliveries() *deliveries {
	return &deliveries{seen: map[string]int{}, first: map[string]time.Time{}}
}

func (d *deliveries) add(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[id] == 0 {
		d.first[id] = time.Now()
	}
	d.seen[id]++
	d.total++
}

func (d *deliveries) counts() (unique, total int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen), d.total
}

// runDrainer runs a drainer on c for tenants (no outflow limit unless
// given) until stop, which stops the drainer and then the consumer.
func runDrainer(t testing.TB, c queue.Consumer, rdb redis.UniversalClient, tenants map[string]config.Tenant, h drainer.Handler) (stop func()) {
	t.Helper()
	d, err := drainer.New(drainer.Config{
		Consumer: c, Redis: rdb, Tenants: tenants, Handler: h, Logger: testLogger(),
		Settings: config.Drainer{Lease: 3 * time.Second, MaxAttempts: 3, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, ShutdownTimeout: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("drainer Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// claimN claims n jobs of tenant (waiting up to timeout for them).
func claimN(t testing.TB, c *kafkaq.Consumer, tenant string, n int, timeout time.Duration) []*queue.Claimed {
	t.Helper()
	var out []*queue.Claimed
	end := time.Now().Add(timeout)
	for len(out) < n {
		if time.Now().After(end) {
			t.Fatalf("claimed %d jobs of %s in %v, want %d", len(out), tenant, timeout, n)
		}
		j, _, err := c.Claim(context.Background(), tenant)
		if err != nil {
			t.Fatalf("claim %s: %v", tenant, err)
		}
		if j != nil {
			out = append(out, j)
		}
	}
	return out
}

// claimNone checks that tenant has nothing more to claim for a while.
func claimNone(t testing.TB, c *kafkaq.Consumer, tenant string, wait time.Duration) {
	t.Helper()
	for end := time.Now().Add(wait); time.Now().Before(end); {
		j, _, err := c.Claim(context.Background(), tenant)
		if err != nil {
			t.Fatalf("claim %s: %v", tenant, err)
		}
		if j != nil {
			t.Fatalf("claimed %s (offset past what was expected), want nothing more", j.Envelope.ID)
		}
	}
}

func finish(t testing.TB, c queue.Consumer, j *queue.Claimed, dead *queue.DeadLetter) {
	t.Helper()
	if err := c.Finish(context.Background(), j, queue.Outcome{Dead: dead}); err != nil {
		t.Fatalf("finish %s: %v", j.Envelope.ID, err)
	}
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(logWriter{}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type logWriter struct{}

func (logWriter) Write(b []byte) (int, error) { fmt.Print(string(b)); return len(b), nil }

var errReject = errors.New("the sink refuses this job")
