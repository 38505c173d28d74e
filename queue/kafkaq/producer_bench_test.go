package kafkaq

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// BenchmarkEnqueue measures enqueue throughput of one job (1 KiB payload)
// per call, from many concurrent callers, against Kafka with acks=all (plus
// the backlog INCRBY in Redis, as in production). deploy/bench/kafka-perf.sh
// runs it next to the peer tool.
func BenchmarkEnqueue(b *testing.B) {
	b.Run("kafka", func(b *testing.B) {
		cfg := kafkaTestConfig(b, testenv.KafkaBrokers(b), queuetest.BenchEnv("SLUICE_BENCH_PARTITIONS", 12))
		cfg.BatchTimeout = queuetest.BenchDuration(b, "SLUICE_BENCH_BATCH_TIMEOUT")
		rdb := testenv.Redis(b)
		p := newTestKafkaProducer(b, cfg, rdb)
		calls, size := queuetest.BenchJobs(b, queuetest.BenchEnv("SLUICE_BENCH_TENANTS", 64))
		b.Cleanup(func() { cleanupBenchKeys(rdb, calls) })
		queuetest.BenchEnqueue(b, p, calls, size)
		if n := p.sender.requests.Load(); n > 0 {
			b.ReportMetric(float64(p.sender.messages.Load())/float64(n), "jobs/request")
		}
	})
}

// BenchmarkEnqueueLatency calls Enqueue from one goroutine, so ns/op is the
// latency of one call with nothing to share a batch with: the batch timeout
// (2ms) plus one acks=all produce round trip.
func BenchmarkEnqueueLatency(b *testing.B) {
	b.Run("kafka", func(b *testing.B) {
		cfg := kafkaTestConfig(b, testenv.KafkaBrokers(b), 1)
		rdb := testenv.Redis(b)
		p := newTestKafkaProducer(b, cfg, rdb)
		calls, _ := queuetest.BenchJobs(b, 1)
		b.Cleanup(func() { cleanupBenchKeys(rdb, calls) })
		queuetest.BenchSerial(b, p, calls[0])
	})
}

// cleanupBenchKeys deletes the benchmark tenants' counters and sequences
// from the shared Redis.
func cleanupBenchKeys(rdb redis.UniversalClient, calls [][]queue.Envelope) {
	for _, c := range calls {
		t := c[0].Tenant
		rdb.Del(context.Background(), keys.Queue(t), keys.Backlog(t), keys.JobSeq(t), keys.JobsDispatched(t))
	}
}
