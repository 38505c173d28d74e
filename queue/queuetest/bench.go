package queuetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// BenchEnv reads the positive integer benchmark knob name from the
// environment, def when unset, so deploy/bench/kafka-perf.sh can run the
// Kafka benchmark with the same partitions as the peer tool. The knobs:
//
//	SLUICE_BENCH_PARTITIONS   partitions of the benchmark topic (default 12)
//	SLUICE_BENCH_PARALLELISM  goroutines per GOMAXPROCS for RunParallel
//	                          (default 64: each call waits for its ack, so
//	                          throughput needs many calls in flight, as many
//	                          HTTP requests would be)
//	SLUICE_BENCH_TENANTS      tenants the jobs are spread over (default 64)
//	SLUICE_BENCH_BATCH_TIMEOUT  kafkaq.Settings.BatchTimeout (default 100us, the
//	                          configuration's default; must be positive)
func BenchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchDuration reads a duration from the environment (default 100us, the
// product's). It must be positive: kafkaq.Settings takes a zero BatchTimeout as its
// default, so "0" would silently measure the default (as docs/perf.md step 23
// found of step 15's "0 ms" runs), and the configuration refuses anything
// below 1ns (config/validate.go).
func BenchDuration(b *testing.B, name string) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		v = "100us"
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	if d <= 0 {
		b.Fatalf("%s=%s: must be positive (a zero batch timeout is the default, a negative one is refused)", name, v)
	}
	return d
}

// BenchJobs returns one single-job call per tenant with a 1 KiB payload,
// and the size of one encoded envelope (the Kafka message value). The ids
// are 32 hex digits, as ingest makes them; BenchEnqueue gives every call a
// new one.
func BenchJobs(b *testing.B, tenants int) ([][]queue.Envelope, int) {
	payload, _ := json.Marshal(strings.Repeat("x", 1024-2)) // 1024 bytes of JSON
	calls := make([][]queue.Envelope, tenants)
	prefix := testenv.Name(b, "bench")
	for i := range calls {
		calls[i] = []queue.Envelope{{ID: benchID(0), Tenant: fmt.Sprintf("%s-%d", prefix, i), Type: "email", Cost: 1, Payload: payload}}
	}
	e := calls[0][0]
	e.Version = queue.EnvelopeVersion
	v, err := e.Encode()
	if err != nil {
		b.Fatal(err)
	}
	return calls, len(v)
}

// BenchEnqueue runs p.Enqueue of one job per op from parallel goroutines and
// reports jobs/s, the envelope's size and p99_ms, the 99th percentile of
// one call's latency (a job waiting for its ack).
func BenchEnqueue(b *testing.B, p queue.Producer, rdb redis.UniversalClient, calls [][]queue.Envelope, valueBytes int) {
	b.ReportAllocs()
	b.SetParallelism(BenchEnv("SLUICE_BENCH_PARALLELISM", 64))
	var (
		next atomic.Int64
		mu   sync.Mutex
		lat  []time.Duration
	)
	ctx := context.Background()
	b.Cleanup(func() { CleanupBench(rdb, calls, next.Load()) })
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		defer func() { mu.Lock(); lat = append(lat, mine...); mu.Unlock() }()
		for pb.Next() {
			n := next.Add(1)
			// A new job each call, as each request makes (the same id again
			// would take the enqueue's rare path for a reused id).
			jobs := []queue.Envelope{calls[int(n)%len(calls)][0]}
			jobs[0].ID = benchID(n)
			t := time.Now()
			if err := p.Enqueue(ctx, jobs); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t))
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(valueBytes), "value_bytes")
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)*99/100])/float64(time.Millisecond), "p99_ms")
	}
}

// benchID is the n-th benchmark job id: 32 hex digits, as ingest's.
func benchID(n int64) string { return fmt.Sprintf("%032x", n) }

// CleanupBench deletes what BenchEnqueue wrote for calls' tenants, the
// first jobs ids (1 .. jobs) included, from the shared Redis.
func CleanupBench(rdb redis.UniversalClient, calls [][]queue.Envelope, jobs int64) {
	ctx := context.Background()
	var ks []string
	for _, c := range calls {
		t := c[0].Tenant
		ks = append(ks, keys.Queue(t), keys.Backlog(t), keys.JobSeq(t), keys.JobsDispatched(t), keys.JobIndex(t, "queued"))
	}
	for n := int64(0); n <= jobs; n++ {
		ks = append(ks, keys.JobState(calls[int(n)%len(calls)][0].Tenant, benchID(n)))
	}
	for len(ks) > 0 { // one key per command: tenants hash to different Cluster slots
		chunk := ks[:min(len(ks), 10_000)]
		ks = ks[len(chunk):]
		_, _ = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for _, k := range chunk {
				pipe.Unlink(ctx, k)
			}
			return nil
		})
	}
}

// BenchSerial calls p.Enqueue(jobs) from one goroutine per op.
func BenchSerial(b *testing.B, p queue.Producer, jobs []queue.Envelope) {
	b.ReportAllocs()
	ctx := context.Background()
	for b.Loop() {
		if err := p.Enqueue(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
}
