package kafkaclustertest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/backend"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

const apiKey = "kcluster-key"

// sink counts the deliveries of each job id and notes the first one's time.
type sink struct {
	mu    sync.Mutex
	got   map[string]int
	first map[string]time.Time
	srv   *httptest.Server
}

func newSink(t *testing.T) *sink {
	s := &sink{got: map[string]int{}, first: map[string]time.Time{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("Sluice-Job-Id")
		s.mu.Lock()
		if s.got[id]++; s.got[id] == 1 {
			s.first[id] = time.Now()
		}
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// firstDelivery returns the time of the first delivery of a job sent at or
// after from, among answers.
func (s *sink) firstDelivery(answers []answer, from time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	for _, a := range answers {
		if at, ok := s.first[a.id]; ok && !a.sent.Before(from) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// deliveries returns a copy of the delivery count of every id.
func (s *sink) deliveries() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.got))
	for id, n := range s.got {
		out[id] = n
	}
	return out
}

// stack is ingest and two drainers on the Kafka backend of a cluster, with
// the shared Redis (a tenant of the test's own) and a sink.
type stack struct {
	cfg    *config.Config
	bcfg   backend.Config
	tenant string
	url    string
	sink   *sink
}

// startStack runs the stack on brokers. The topics are sluice's own: created
// by the producer with kafka.replication_factor and min_insync_replicas 0
// (auto: 3 and 2 on 3 brokers), one partition, so one leader takes every
// job.
func startStack(t *testing.T, brokers []string) *stack {
	t.Helper()
	st := &stack{tenant: testenv.Name(t, "kc"), sink: newSink(t)}
	y := "queue: {backend: kafka}\n" +
		"ingest: {retry_after: 1s}\n" +
		"drainer: {lease: 5s, max_attempts: 100, backoff_base: 10ms, backoff_max: 200ms}\n" +
		"tenants:\n  " + st.tenant + ":\n    api_keys: [\"" + config.HashKey(apiKey) + "\"]\n" +
		"    outflow: {unlimited: true}\n    target: {url: " + st.sink.srv.URL + ", timeout: 5s}\n"
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, y)
	}
	cfg.Kafka.Brokers = brokers
	st.cfg = cfg
	rdb := testenv.Redis(t)
	st.bcfg = backend.Config{Backend: backend.Kafka, Redis: rdb, Tenants: []string{st.tenant}, Lease: cfg.Drainer.Lease,
		Kafka: kafkaq.Settings{Brokers: brokers, Topic: testenv.Name(t, "jobs"), DLQTopic: testenv.Name(t, "dlq"),
			Partitions: 1, ConsumerGroup: testenv.Name(t, "group"), BatchTimeout: 2 * time.Millisecond,
			ProduceTimeout: 2 * time.Second,
			Group: kafkaq.GroupTimeouts{SessionTimeout: 6 * time.Second, HeartbeatInterval: time.Second,
				RebalanceTimeout: 10 * time.Second, RevokeTimeout: 6 * time.Second}},
		Logger: quiet()}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	prod, err := backend.NewProducer(ctx, st.bcfg)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	st.url = startIngest(t, rdb, cfg, prod)
	for range 2 {
		startDrainer(t, rdb, st.bcfg, cfg)
	}
	return st
}

// startIngest runs an ingest Server on rdb and prod and returns its URL.
func startIngest(t *testing.T, rdb *redis.Client, cfg *config.Config, prod queue.Producer) string {
	t.Helper()
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := ingest.New(ingest.Config{Settings: cfg, Redis: rdb, Producer: prod, Admitter: adm,
		Registerer: reg, Gatherer: reg, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); _ = prod.Close() })
	return hs.URL
}

// startDrainer runs one drainer (a consumer group member) of cfg's tenants.
func startDrainer(t *testing.T, rdb *redis.Client, bcfg backend.Config, cfg *config.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cons, run, err := backend.NewConsumer(ctx, bcfg)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	d, err := drainer.New(drainer.Config{Consumer: cons, Redis: rdb, Tenants: cfg.Tenants, Settings: cfg.Drainer, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	cctx, stopConsumer := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = d.Run(rctx) }()
	go func() { defer wg.Done(); _ = run(cctx) }()
	t.Cleanup(func() { stop(); time.Sleep(10 * time.Millisecond); stopConsumer(); wg.Wait() })
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// records returns how many records of each job id the jobs topic holds
// (read from its start to its end).
func (st *stack) records(t *testing.T) map[string]int {
	t.Helper()
	k := st.bcfg.Kafka
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// A node restarted a moment ago may still be taking its partitions
	// back: its connection can end mid-answer (EOF). Ask again until ctx.
	var lo *kafka.ListOffsetsResponse
	var err error
	for {
		lo, err = client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{k.Topic: {kafka.LastOffsetOf(0)}}})
		if err == nil && len(lo.Topics[k.Topic]) == 1 && lo.Topics[k.Topic][0].Error == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("end offset of %s: %+v, %v", k.Topic, lo, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	end := lo.Topics[k.Topic][0].LastOffset
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers, Topic: k.Topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	copies := map[string]int{}
	for off := int64(0); off < end; {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s at %d of %d: %v", k.Topic, off, end, err)
		}
		for _, h := range m.Headers {
			if h.Key == kafkaq.HeaderJobID {
				copies[string(h.Value)]++
			}
		}
		off = m.Offset + 1
	}
	return copies
}
