package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// Benchmark knobs, read from the environment so deploy/bench/kafka-perf.sh
// can run the Kafka benchmark with the same partitions as the peer tool.
//
//	SLUICE_BENCH_PARTITIONS   partitions of the benchmark topic (default 12)
//	SLUICE_BENCH_PARALLELISM  goroutines per GOMAXPROCS for RunParallel
//	                          (default 64: each call waits for its ack, so
//	                          throughput needs many calls in flight, as many
//	                          HTTP requests would be)
//	SLUICE_BENCH_TENANTS      tenants the jobs are spread over (default 64)
//	SLUICE_BENCH_BATCH_TIMEOUT  config.Kafka.BatchTimeout (default 2ms, the
//	                          configuration's default)
func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchDuration reads a duration from the environment (default 2ms).
func benchDuration(b *testing.B, name string) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		v = "2ms"
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return d
}

// benchJobs returns one single-job call per tenant with a 1 KiB payload,
// and the size of one encoded envelope (the Kafka message value).
func benchJobs(b *testing.B, tenants int) ([][]Envelope, int) {
	payload, _ := json.Marshal(strings.Repeat("x", 1024-2)) // 1024 bytes of JSON
	calls := make([][]Envelope, tenants)
	prefix := testenv.Name(b, "bench")
	for i := range calls {
		calls[i] = []Envelope{{ID: "job-0001", Tenant: fmt.Sprintf("%s-%d", prefix, i), Type: "email", Cost: 1, Payload: payload}}
	}
	e := calls[0][0]
	e.Version = EnvelopeVersion
	v, err := e.Encode()
	if err != nil {
		b.Fatal(err)
	}
	return calls, len(v)
}

// runEnqueue runs p.Enqueue of one job per op from parallel goroutines and
// reports jobs/s and the envelope's size.
func runEnqueue(b *testing.B, p Producer, calls [][]Envelope, valueBytes int) {
	b.ReportAllocs()
	b.SetParallelism(benchEnv("SLUICE_BENCH_PARALLELISM", 64))
	var next atomic.Int64
	ctx := context.Background()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			jobs := calls[int(next.Add(1))%len(calls)]
			if err := p.Enqueue(ctx, jobs); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(valueBytes), "value_bytes")
}

// BenchmarkEnqueue measures enqueue throughput of one job (1 KiB payload)
// per call, from many concurrent callers, against the real servers: the
// shared Redis, and Kafka with acks=all (plus the backlog INCRBY in Redis,
// as in production).
func BenchmarkEnqueue(b *testing.B) {
	tenants := benchEnv("SLUICE_BENCH_TENANTS", 64)
	b.Run("redis", func(b *testing.B) {
		rdb := testenv.Redis(b)
		p := newBenchRedisProducer(b, rdb)
		calls, size := benchJobs(b, tenants)
		b.Cleanup(func() { cleanupBenchKeys(rdb, calls) })
		runEnqueue(b, p, calls, size)
	})
	b.Run("kafka", func(b *testing.B) {
		cfg := kafkaTestConfig(b, testenv.KafkaBrokers(b), benchEnv("SLUICE_BENCH_PARTITIONS", 12))
		cfg.BatchTimeout = benchDuration(b, "SLUICE_BENCH_BATCH_TIMEOUT")
		rdb := testenv.Redis(b)
		p := newTestKafkaProducer(b, cfg, rdb)
		calls, size := benchJobs(b, tenants)
		b.Cleanup(func() { cleanupBenchKeys(rdb, calls) })
		runEnqueue(b, p, calls, size)
		if n := p.sender.requests.Load(); n > 0 {
			b.ReportMetric(float64(p.sender.messages.Load())/float64(n), "jobs/request")
		}
	})
}

// BenchmarkEnqueueLatency calls Enqueue from one goroutine, so ns/op is the
// latency of one call with nothing to share a batch with: for Kafka the
// batch timeout (2ms) plus one acks=all produce round trip.
func BenchmarkEnqueueLatency(b *testing.B) {
	b.Run("redis", func(b *testing.B) {
		rdb := testenv.Redis(b)
		p := newBenchRedisProducer(b, rdb)
		calls, _ := benchJobs(b, 1)
		b.Cleanup(func() { cleanupBenchKeys(rdb, calls) })
		runSerial(b, p, calls[0])
	})
	b.Run("kafka", func(b *testing.B) {
		cfg := kafkaTestConfig(b, testenv.KafkaBrokers(b), 1)
		rdb := testenv.Redis(b)
		p := newTestKafkaProducer(b, cfg, rdb)
		calls, _ := benchJobs(b, 1)
		b.Cleanup(func() { cleanupBenchKeys(rdb, calls) })
		runSerial(b, p, calls[0])
	})
}

func newBenchRedisProducer(b *testing.B, rdb redis.UniversalClient) *RedisProducer {
	p, err := NewRedisProducer(rdb, nil)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func runSerial(b *testing.B, p Producer, jobs []Envelope) {
	b.ReportAllocs()
	ctx := context.Background()
	for b.Loop() {
		if err := p.Enqueue(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
}

// cleanupBenchKeys deletes the benchmark tenants' queues and counters from
// the shared Redis.
func cleanupBenchKeys(rdb redis.UniversalClient, calls [][]Envelope) {
	for _, c := range calls {
		rdb.Del(context.Background(), enqueueKeys(c[0].Tenant)...)
	}
}
