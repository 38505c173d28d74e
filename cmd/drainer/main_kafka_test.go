package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// kafkaSetup is one test's topics and group on the shared Kafka.
type kafkaSetup struct {
	cfg    kafkaq.Settings
	client *kafka.Client
}

func newKafkaSetup(t *testing.T, partitions int) *kafkaSetup {
	brokers := testenv.KafkaBrokers(t)
	k := &kafkaSetup{
		cfg: kafkaq.Settings{Brokers: brokers, Topic: testenv.Name(t, "jobs"), DLQTopic: testenv.Name(t, "dlq"),
			Partitions: partitions, ReplicationFactor: 1, ConsumerGroup: testenv.Name(t, "group")},
		client: &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second},
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k.client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{k.cfg.Topic, k.cfg.DLQTopic}})
	})
	return k
}

// produce enqueues n jobs of each tenant with the Kafka producer, as ingest
// does before it answers 202.
func (k *kafkaSetup) produce(t *testing.T, tenants []string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := kafkaq.NewProducer(ctx, kafkaq.ProducerConfig{Kafka: k.cfg, Redis: testenv.Redis(t), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tenant := range tenants {
		for start := 0; start < n; start += 500 {
			var jobs []queue.Envelope
			for i := start; i < min(n, start+500); i++ {
				jobs = append(jobs, queue.Envelope{ID: fmt.Sprintf("%s-%05d", tenant, i), Tenant: tenant, Type: "t", Cost: 1, Payload: []byte(`{}`)})
			}
			if err := p.Enqueue(ctx, jobs); err != nil {
				t.Fatalf("enqueue: %v", err)
			}
		}
	}
}

// offsets returns the committed offsets of the group and the end offsets of
// the topic, per partition.
func (k *kafkaSetup) offsets(t *testing.T) (committed, ends map[int]int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids := make([]int, k.cfg.Partitions)
	ask := make([]kafka.OffsetRequest, k.cfg.Partitions)
	for i := range ids {
		ids[i], ask[i] = i, kafka.LastOffsetOf(i)
	}
	committed, ends = map[int]int64{}, map[int]int64{}
	of, err := k.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: k.cfg.ConsumerGroup, Topics: map[string][]int{k.cfg.Topic: ids}})
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	for _, p := range of.Topics[k.cfg.Topic] {
		committed[p.Partition] = p.CommittedOffset
	}
	lo, err := k.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{k.cfg.Topic: ask}})
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	for _, p := range lo.Topics[k.cfg.Topic] {
		ends[p.Partition] = p.LastOffset
	}
	return committed, ends
}

// dlqLength returns how many records the DLQ topic holds (-1 when it does
// not exist yet).
func (k *kafkaSetup) dlqLength(t *testing.T) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ask := make([]kafka.OffsetRequest, k.cfg.Partitions)
	for i := range ask {
		ask[i] = kafka.LastOffsetOf(i)
	}
	lo, err := k.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{k.cfg.DLQTopic: ask}})
	if err != nil {
		return -1
	}
	var n int64
	for _, p := range lo.Topics[k.cfg.DLQTopic] {
		n += p.LastOffset
	}
	return n
}

// writeKafkaConfig writes a drainer config on the Kafka backend for tenants
// and returns its path.
func (k *kafkaSetup) writeConfig(t *testing.T, tenants []string, sinkURL, outflow string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `redis:
  addr: %s
queue:
  backend: kafka
kafka:
  brokers: [%s]
  topic: %s
  partitions: %d
  dlq_topic: %s
  consumer_group: %s
drainer:
  listen: %s
  lease: 1s
  shutdown_timeout: 2s
  backoff_base: 10ms
  backoff_max: 100ms
tenants:
`, testenv.RedisAddr(t), strings.Join(k.cfg.Brokers, ", "), k.cfg.Topic, k.cfg.Partitions, k.cfg.DLQTopic, k.cfg.ConsumerGroup, testenv.FreeAddr(t))
	for _, tenant := range tenants {
		fmt.Fprintf(&b, "  %s:\n    outflow: {%s}\n    target: {url: %q, timeout: 5s}\n", tenant, outflow, sinkURL)
	}
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKafkaNothingLostWhenADrainerIsKilled runs two drainer processes on
// 2,000 jobs of four tenants spread over four partitions, SIGKILLs one under
// load and starts it again. Every job must reach the sink; duplicates (jobs
// the killed drainer delivered after its last commit) are allowed and
// reported. The killed member's partitions wait for its session to expire
// (10s) before they move.
func TestKafkaNothingLostWhenADrainerIsKilled(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	k := newKafkaSetup(t, 4)
	// One tenant per partition (the producer's murmur2 partitioner), so
	// both drainers hold loaded partitions whichever is killed.
	var tenants []string
	for covered := map[int]bool{}; len(covered) < 4; {
		tn := testenv.Name(t, "kk")
		if p := (kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte(tn)}, 0, 1, 2, 3); !covered[p] {
			covered[p] = true
			tenants = append(tenants, tn)
		}
	}
	const perTenant = 500
	n := len(tenants) * perTenant
	k.produce(t, tenants, perTenant)
	sink := newCountingSink(t, 2*time.Millisecond)
	cfg := func() string { return k.writeConfig(t, tenants, sink.srv.URL, "rate: 150, capacity: 20") } // each its own listen address
	a := start(t, cfg())
	start(t, cfg())

	testenv.WaitFor(t, 20*time.Second, "a third delivered", func() bool { u, _ := sink.counts(); return u >= n/3 })
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	killedAt, _ := sink.counts()
	start(t, cfg())

	testenv.WaitFor(t, 40*time.Second, "every job delivered, committed and off the backlog", func() bool {
		u, _ := sink.counts()
		if u != n {
			return false
		}
		for _, tn := range tenants {
			if b, _ := rdb.Get(ctx, keys.Backlog(tn)).Int(); b != 0 {
				return false
			}
		}
		committed, ends := k.offsets(t)
		for p, end := range ends {
			if committed[p] != end {
				return false
			}
		}
		return true
	})
	unique, total := sink.counts()
	t.Logf("SIGKILL under load (Kafka): %d jobs, %d delivered unique, %d deliveries, %d duplicates; %d delivered at the kill", n, unique, total, total-unique, killedAt)
	if d := k.dlqLength(t); d > 0 {
		t.Errorf("dead letters = %d, want 0", d)
	}
}

// TestKafkaSIGTERMCommitsAndExits sends SIGTERM while deliveries (1.5 s
// each, five at a time) are in flight: the drainer must let them finish
// within shutdown_timeout (2 s), commit exactly the finished jobs, leave the
// group and exit 0 within the deadline.
func TestKafkaSIGTERMCommitsAndExits(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	k := newKafkaSetup(t, 1)
	tenant := testenv.Name(t, "kterm")
	const n = 200
	k.produce(t, []string{tenant}, n)
	sink := newCountingSink(t, 1500*time.Millisecond)
	cmd := start(t, k.writeConfig(t, []string{tenant}, sink.srv.URL, "concurrency: 5"))
	testenv.WaitFor(t, 20*time.Second, "5 jobs in flight", func() bool {
		c, _ := rdb.ZCard(ctx, keys.Inflight(tenant)).Result()
		return c == 5
	})
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := time.Since(t0)
	if err != nil {
		t.Errorf("exit: %v, want status 0", err)
	}
	if took > 4*time.Second {
		t.Errorf("exited %v after SIGTERM, want within shutdown_timeout 2s + 2s to commit and leave the group", took)
	}
	unique, total := sink.counts()
	committed, _ := k.offsets(t)
	backlog, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int()
	t.Logf("SIGTERM (Kafka): exited in %v; %d delivered (%d deliveries), committed offset %d, backlog %d", took, unique, total, committed[0], backlog)
	if committed[0] != int64(unique) || backlog != n-unique {
		t.Errorf("committed offset %d, backlog %d after %d delivered; want the offset at the delivered jobs and backlog %d", committed[0], backlog, unique, n-unique)
	}
}
