package ingest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/deploy/bench/ingestpeer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue/kafkaq"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// benchConcurrency is the number of clients, each with its own keep-alive
// connection, that submit at once.
const benchConcurrency = 32

var benchBody = []byte(`{"type":"email","payload":{"to":"ada@example.com","template":"welcome"}}`)

// BenchmarkIngest measures submissions end to end over loopback HTTP at a
// fixed concurrency of 32 keep-alive clients: jobs/s and the p50/p99 latency
// of one POST /v1/jobs, with the jobs made durable on the Redis backend
// (EVALSHA admission + enqueue script) or the Kafka backend (acks=all), and,
// as the floor measured in the same run, a bare net/http handler that
// decodes the same JSON and answers 202 without Redis or a queue. The
// tenant's limit is high enough never to refuse. Each sub-benchmark that
// uses Redis has a private redis-server without persistence
// (testenv.StartRedis), so redis_cpu_us is its server's CPU per 202 and the
// backends and the peer are compared on like servers. The clients are
// loadConn's (loadgen_test.go), which allocate nothing per request, so
// allocs/op is the server's. The Kafka producer's batch timeout is
// SLUICE_BENCH_BATCH_TIMEOUT (default 100us, the product's kafka.batch_timeout).
//
//	go test ./ingest -run '^$' -bench BenchmarkIngest -benchtime 20000x
//
// make bench runs go test in rounds (BENCH_COUNT) and numbers them in
// SLUICE_BENCH_ROUND; an even round runs the sub-benchmarks in the reverse
// order, so neither side of a ratio always runs first.
func BenchmarkIngest(b *testing.B) {
	subs := []struct {
		name string
		run  func(*testing.B)
	}{{"redis", func(b *testing.B) {
		rdb := privateRedis(b)
		tenant := testenv.Name(b, "bench")
		h := startIngest(b, benchConfig(b, tenant), deps{rdb: rdb})
		runIngestBench(b, h.url, apiKey(tenant), rdb)
		reportMean(b, h.reg, "sluice_admission_batch_size", 1, "batch")
		reportMean(b, h.reg, "sluice_admission_duration_seconds", 1000, "admit_ms")
		reportMean(b, h.reg, "sluice_http_request_duration_seconds", 1000, "http_ms")
	}}, {"peer_handwritten", func(b *testing.B) {
		rdb := privateRedis(b)
		hs := httptest.NewServer(ingestpeer.New(ingestpeer.Config{
			Redis: rdb, Tenants: map[string]string{"peer-key": "peer"}, PerSecond: 1_000_000,
		}))
		b.Cleanup(hs.Close)
		runIngestBench(b, hs.URL, "peer-key", rdb)
	}}, {"kafka", func(b *testing.B) {
		brokers := testenv.KafkaBrokers(b)
		// A private Redis, as the Redis backend's and the peer's rows have:
		// the backends' ratio compares like with like (the shared server
		// keeps an append-only file and other tests' keys).
		rdb := privateRedis(b)
		topic := testenv.CreateTopic(b, brokers, 4)
		reg := prometheus.NewRegistry()
		producer, err := kafkaq.NewProducer(b.Context(), kafkaq.ProducerConfig{Registerer: reg, Kafka: kafkaq.Settings{
			Brokers: brokers, Topic: topic, Partitions: 4, ReplicationFactor: 1,
			BatchTimeout: queuetest.BenchDuration(b, "SLUICE_BENCH_BATCH_TIMEOUT"), ProduceTimeout: 5 * time.Second,
		}, Redis: rdb})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = producer.Close() })
		tenant := testenv.Name(b, "bench")
		cfg := benchConfig(b, tenant)
		cfg.Queue.Backend = "kafka"
		h := startIngest(b, cfg, deps{rdb: rdb, producer: producer})
		runIngestBench(b, h.url, apiKey(tenant), rdb)
		// Warm-up included.
		reportMean(b, reg, "sluice_kafka_produce_batch_jobs", 1, "jobs_per_req")
		reportMean(b, h.reg, "sluice_admission_duration_seconds", 1000, "admit_ms")
		reportMean(b, reg, "sluice_enqueue_duration_seconds", 1000, "enqueue_ms")
		reportMean(b, h.reg, "sluice_http_request_duration_seconds", 1000, "http_ms")
	}}, {"bare_nethttp", func(b *testing.B) {
		hs := httptest.NewServer(http.HandlerFunc(bareHandler))
		b.Cleanup(hs.Close)
		runIngestBench(b, hs.URL, "bare", nil)
	}}}
	if round, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_ROUND")); err == nil && round%2 == 0 {
		slices.Reverse(subs)
	}
	for _, s := range subs {
		b.Run(s.name, s.run)
	}
}

// benchConfig has one tenant with a GCRA limit of a million per second, far
// above what one machine submits.
func benchConfig(b *testing.B, tenant string) *config.Config {
	return testConfig(b, tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 1000000, period: 1s}\n"))
}

// bareHandler is the floor: the same JSON decoded and a 202 answered, no
// auth, no Redis, no queue.
func bareHandler(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Type     string          `json:"type"`
		Payload  json.RawMessage `json:"payload"`
		ID       string          `json:"id"`
		Deadline *string         `json:"deadline"`
		Cost     *int64          `json:"cost"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Type == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	b, _ := json.Marshal(map[string]any{"job_id": "0", "tenant": "bare", "enqueued_at": time.Now().UTC()})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(b)
}

// runIngestBench sends b.N submissions from benchConcurrency clients and
// reports jobs/s, p50_ms and p99_ms, and, when rdb is the private Redis the
// handler uses, redis_cpu_us: the server's CPU time (INFO cpu) per 202.
func runIngestBench(b *testing.B, url, key string, rdb *redis.Client) {
	conns := make([]*loadConn, benchConcurrency)
	for i := range conns {
		c, err := dialLoad(url, key, benchBody)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.c.Close() })
		conns[i] = c
	}
	// Warm the connections and the script cache outside the measurement.
	for _, c := range conns {
		if _, err := c.timedPost(); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}

	latencies := make([][]time.Duration, benchConcurrency)
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	var cpu0 time.Duration
	if rdb != nil {
		cpu0 = testenv.RedisCPU(b, rdb)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := range benchConcurrency {
		wg.Go(func() {
			lat := make([]time.Duration, 0, b.N/benchConcurrency+1)
			for next.Add(1) <= int64(b.N) {
				d, err := conns[w].timedPost()
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				lat = append(lat, d)
			}
			latencies[w] = lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := firstErr.Load(); err != nil {
		b.Fatalf("submission failed: %v", *err)
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	ms := func(q float64) float64 {
		return float64(all[min(len(all)-1, int(q*float64(len(all))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(ms(0.50), "p50_ms")
	b.ReportMetric(ms(0.99), "p99_ms")
	if rdb != nil {
		cpu := testenv.RedisCPU(b, rdb) - cpu0
		b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "redis_cpu_us")
	}
}

// reportMean reports the mean of histogram name in g, times scale, as unit
// (where a Kafka-backed 202 spends its time: jobs per produce request,
// admission, enqueue, the whole request).
func reportMean(b *testing.B, g prometheus.Gatherer, name string, scale float64, unit string) {
	if v, ok := testenv.HistogramMean(b, g, name); ok {
		b.ReportMetric(v*scale, unit)
	}
}
