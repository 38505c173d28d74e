package ingest_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/backend"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// TestUnknownOutcomeRetryKafka: a submission with an id while the private
// broker is stopped (SIGSTOP) is a 503 whose produce request waits in the
// broker's socket and may still be appended when it resumes; the client
// retries with the same id until a 202, which names the same job id. A
// drainer consumes every copy, and the sink receives the id exactly once:
// a second copy is settled unsent (sluice_jobs_duplicate_skipped_total).
func TestUnknownOutcomeRetryKafka(t *testing.T) {
	t.Parallel()
	broker := testenv.StartKafka(t)
	brokers := broker.Brokers()
	producer, topic := kafkaProducer(t, brokers)
	tenant := testenv.Name(t, "kunk")
	rdb := testenv.Redis(t)
	h := startIngest(t, kafkaConfig(t, brokers, topic, tenantYAML(tenant, "")), deps{rdb: rdb, producer: producer})
	sink, reg := startKafkaDrainer(t, brokers, topic, tenant)

	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"warm"}`); a.status != http.StatusAccepted {
		t.Fatalf("broker up: %d %s", a.status, a.body)
	}
	broker.Pause()
	body := `{"type":"t","id":"x1","payload":{"n":1}}`
	a := h.post(t, tenant, "/v1/jobs", body)
	broker.Resume()
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Fatalf("broker stopped: %d %s, want 503 + Retry-After", a.status, a.body)
	}
	t.Logf("stopped broker: %d %s", a.status, a.body)
	var jobID any
	testenv.WaitFor(t, 60*time.Second, "a 202 for the retried id", func() bool {
		a = h.post(t, tenant, "/v1/jobs", body)
		if a.status == http.StatusAccepted {
			jobID = a.json(t)["job_id"]
		}
		return a.status == http.StatusAccepted
	})
	if jobID != "x1" {
		t.Errorf("retry's job_id %v, want x1", jobID)
	}
	records := recordsOf(t, brokers, topic, "x1")
	copies := len(records)
	t.Logf("x1 has %d records on the topic", copies)
	lbl := map[string]string{"tenant": tenant}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("at the end: the sink had x1 %d times, sluice_jobs_duplicate_skipped_total %v; its records: %q",
				sink.count("x1"), testenv.MetricValue(t, reg, "sluice_jobs_duplicate_skipped_total", lbl), records)
		}
	})
	testenv.WaitFor(t, 30*time.Second, "every copy of x1 consumed", func() bool {
		return sink.count("x1") >= 1 && testenv.MetricValue(t, reg, "sluice_jobs_duplicate_skipped_total", lbl) >= float64(copies-1)
	})
	time.Sleep(2 * time.Second) // a late second delivery would show now
	if n := sink.count("x1"); n != 1 {
		t.Errorf("the sink received x1 %d times (%d records on the topic), want once", n, copies)
	}
}

// handlerCounts counts the deliveries of each job id a drainer handler received.
type handlerCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *handlerCounts) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[id]
}

// startKafkaDrainer runs a drainer for tenant on topic until the test ends;
// its handler counts deliveries, reg holds its metrics.
func startKafkaDrainer(t *testing.T, brokers []string, topic, tenant string) (*handlerCounts, *prometheus.Registry) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := backend.Config{Backend: backend.Kafka, Redis: testenv.Redis(t), Tenants: []string{tenant}, Logger: log,
		Kafka: kafkaq.Settings{Brokers: brokers, Topic: topic, DLQTopic: testenv.Name(t, "dlq"), Partitions: 1,
			ReplicationFactor: 1, ConsumerGroup: testenv.Name(t, "group")}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, runConsumer, err := backend.NewConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sink := &handlerCounts{n: map[string]int{}}
	reg := prometheus.NewRegistry()
	d, err := drainer.New(drainer.Config{Consumer: c, Redis: cfg.Redis, Registerer: reg, Logger: log,
		Settings: config.Drainer{Lease: 3 * time.Second, MaxAttempts: 3, ShutdownTimeout: 2 * time.Second},
		Tenants:  map[string]config.Tenant{tenant: {}},
		Handler: drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
			sink.mu.Lock()
			sink.n[job.ID]++
			sink.mu.Unlock()
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stopConsumer := context.WithCancel(context.Background())
	dctx, stopDrainer := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = runConsumer(cctx) }()
	go func() { defer wg.Done(); _ = d.Run(dctx); stopConsumer() }()
	t.Cleanup(func() { stopDrainer(); wg.Wait() })
	return sink, reg
}

// recordsOf returns the values of the records of job id on partition 0 of
// topic, in offset order.
func recordsOf(t *testing.T, brokers []string, topic, id string) []string {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 200 * time.Millisecond})
	defer r.Close()
	var vals []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		m, err := r.ReadMessage(ctx)
		cancel()
		if err != nil {
			return vals
		}
		for _, hd := range m.Headers {
			if hd.Key == kafkaq.HeaderJobID && string(hd.Value) == id {
				vals = append(vals, string(m.Value))
			}
		}
	}
}
