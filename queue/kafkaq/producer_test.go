package kafkaq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

func TestNewKafkaProducerRefusesBadConfig(t *testing.T) {
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
				t.Errorf("NewKafkaProducer(%+v) = nil error, want one", cfg)
			}
		})
	}
	t.Run("broker down", func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := NewProducer(ctx, ProducerConfig{Kafka: ok})
		if !errors.Is(err, queue.ErrUnavailable) {
			t.Errorf("NewKafkaProducer on a closed port = %v, want queue.ErrUnavailable", err)
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
		// in flight; on a loaded machine stragglers that find their lane
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
				gate := make(chan struct{})
				var wg sync.WaitGroup
				errs := make(chan error, calls)
				for i := range calls {
					wg.Go(func() {
						<-gate
						job := queuetest.Job(tenants[i%len(tenants)], fmt.Sprintf("%s-%d", round, i), 1)
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

// TestKafkaProducerBacklogRedisDown: after Kafka's ack, a dead Redis costs
// the backlog counter, not the job: Enqueue returns nil and the error is
// counted.
func TestKafkaProducerBacklogRedisDown(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: 250 * time.Millisecond, ReadTimeout: 250 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	cfg := kafkaTestConfig(t, brokers, 1)
	p := newTestKafkaProducer(t, cfg, rdb)
	srv.Stop()
	if err := p.Enqueue(context.Background(), []queue.Envelope{queuetest.Job("t", "j1", 1)}); err != nil {
		t.Fatalf("Enqueue with Redis down = %v, want nil (the job is on Kafka)", err)
	}
	if got := testutil.ToFloat64(p.sender.backlog.errs); got != 1 {
		t.Errorf(`sluice_redis_errors_total{op="backlog_incr"} = %v, want 1`, got)
	}
	if got := readTopic(t, brokers, cfg.Topic, 1); len(got[0]) != 1 {
		t.Errorf("topic holds %d messages, want 1", len(got[0]))
	}
}

// TestKafkaProducerBrokerDown takes a private broker away twice, stopped
// (connections refused) and frozen with SIGSTOP (connections hang), while
// writers keep enqueueing. Every Enqueue that fails wraps queue.ErrUnavailable and
// returns within the produce timeout; after the broker is back Enqueue
// succeeds again; and every job that Enqueue acknowledged is on the topic.
func TestKafkaProducerBrokerDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private Kafka broker (about 20s)")
	}
	k := testenv.StartKafka(t)
	cfg := kafkaTestConfig(t, k.Brokers(), 2)
	cfg.ProduceTimeout = time.Second
	limit := cfg.ProduceTimeout + 500*time.Millisecond
	p := newTestKafkaProducer(t, cfg, nil)
	ctx := context.Background()
	if err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job("t", "before", 1)}); err != nil {
		t.Fatal(err)
	}
	pause := func(sig syscall.Signal) func() {
		return func() {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(k.LogPath()), "kafka.pid"))
			if err != nil {
				t.Fatalf("pid of the private broker: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid of the private broker: %v", err)
			}
			if err := syscall.Kill(pid, sig); err != nil {
				t.Fatalf("signal %v to broker %d: %v", sig, pid, err)
			}
			if sig == syscall.SIGSTOP {
				waitStopped(t, pid)
			}
		}
	}

	var mu sync.Mutex
	acked := []string{"before"}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("load-%d-%d", w, i)
				start := time.Now()
				err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job(fmt.Sprintf("t%d", w), id, 1)})
				if took := time.Since(start); took > limit {
					t.Errorf("load: Enqueue took %v, want < %v", took, limit)
				}
				switch {
				case err == nil:
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				case !errors.Is(err, queue.ErrUnavailable):
					t.Errorf("load: Enqueue = %v, want nil or queue.ErrUnavailable", err)
				}
			}
		})
	}

	for _, fault := range []struct {
		name          string
		down, recover func()
	}{
		{"stopped", k.Stop, k.Start},
		{"paused", pause(syscall.SIGSTOP), pause(syscall.SIGCONT)},
	} {
		fault.down()
		for i := range 3 {
			start := time.Now()
			err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job("t", fmt.Sprintf("%s-%d", fault.name, i), 1)})
			took := time.Since(start)
			if err == nil {
				// Checked against the topic below, with the other acks.
				mu.Lock()
				acked = append(acked, fmt.Sprintf("%s-%d", fault.name, i))
				mu.Unlock()
			}
			if !errors.Is(err, queue.ErrUnavailable) {
				t.Errorf("%s: Enqueue = %v, want an error wrapping queue.ErrUnavailable", fault.name, err)
				continue
			}
			if took > limit {
				t.Errorf("%s: Enqueue took %v to fail, want < %v", fault.name, took, limit)
			}
			t.Logf("%s: Enqueue failed after %v: %v", fault.name, took.Round(time.Millisecond), err)
		}
		fault.recover()
		// The writer's partition goroutines may still be retrying batches
		// of the failed calls; recovery is measured, not asserted to the ms.
		start := time.Now()
		for {
			err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job("t", "after-"+fault.name, 1)})
			if err == nil {
				t.Logf("%s: Enqueue succeeds %v after the broker is back", fault.name, time.Since(start).Round(time.Millisecond))
				mu.Lock()
				acked = append(acked, "after-"+fault.name)
				mu.Unlock()
				break
			}
			if !errors.Is(err, queue.ErrUnavailable) {
				t.Fatalf("%s: Enqueue after recovery = %v, want nil or queue.ErrUnavailable", fault.name, err)
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("%s: Enqueue still failing 30s after recovery: %v", fault.name, err)
			}
			time.Sleep(100 * time.Millisecond) // between retries, not waiting for a rate
		}
	}
	close(stop)
	wg.Wait()

	onTopic := map[string]bool{}
	for _, msgs := range readTopic(t, k.Brokers(), cfg.Topic, cfg.Partitions) {
		for _, m := range msgs {
			onTopic[header(m, HeaderJobID)] = true
		}
	}
	var missing []string
	for _, id := range acked {
		if !onTopic[id] {
			missing = append(missing, id)
		}
	}
	t.Logf("%d jobs acknowledged, %d messages on the topic", len(acked), len(onTopic))
	if len(missing) > 0 {
		t.Errorf("%d acknowledged jobs are not on the topic: %v", len(missing), missing)
	}
}

// waitStopped waits until every thread of process pid is stopped (state T
// in /proc/pid/task/*/stat): kill returns before a running thread on
// another CPU has taken the signal.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("threads of broker %d: %v", pid, err)
		}
		running := 0
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread exited
			}
			// The state follows the command name, which is in parentheses.
			if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				running++
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d: %d of %d threads still not stopped 5s after SIGSTOP", pid, running, len(tasks))
		}
		time.Sleep(time.Millisecond)
	}
}
