package kafkaq

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// BenchmarkEnqueue measures enqueue throughput of one job (1 KiB payload)
// per call, from many concurrent callers, against Kafka with acks=all.
// deploy/bench/kafka-perf.sh runs it next to the peer tool.
//
//   - kafka: as in production, each call also waits for its post-ack
//     Redis write (the tenant's backlog counter and the job's state
//     "queued", job_state_enqueue.lua).
//   - kafka_no_state: the same producer without Redis (ProducerConfig.Redis
//     nil: no backlog counter, no job state), so the figure is the produce
//     path alone and the difference is what the post-ack write costs.
func BenchmarkEnqueue(b *testing.B) {
	for _, c := range []struct {
		name  string
		state bool
	}{{"kafka", true}, {"kafka_no_state", false}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := kafkaTestConfig(b, testenv.KafkaBrokers(b), queuetest.BenchEnv("SLUICE_BENCH_PARTITIONS", 12))
			cfg.BatchTimeout = queuetest.BenchDuration(b, "SLUICE_BENCH_BATCH_TIMEOUT")
			rdb := testenv.Redis(b) // cleared of the run's keys either way
			var state redis.UniversalClient
			if c.state {
				state = rdb
			}
			p := newTestKafkaProducer(b, cfg, state)
			calls, size := queuetest.BenchJobs(b, queuetest.BenchEnv("SLUICE_BENCH_TENANTS", 64))
			queuetest.BenchEnqueue(b, p, rdb, calls, size)
			if n := p.sender.requests.Load(); n > 0 {
				b.ReportMetric(float64(p.sender.messages.Load())/float64(n), "jobs/request")
			}
		})
	}
}

// BenchmarkEnqueueLatency calls Enqueue from one goroutine, so ns/op is the
// latency of one call with nothing to share a batch with: the batch timeout
// (100µs) plus one acks=all produce round trip.
func BenchmarkEnqueueLatency(b *testing.B) {
	b.Run("kafka", func(b *testing.B) {
		cfg := kafkaTestConfig(b, testenv.KafkaBrokers(b), 1)
		rdb := testenv.Redis(b)
		p := newTestKafkaProducer(b, cfg, rdb)
		calls, _ := queuetest.BenchJobs(b, 1)
		b.Cleanup(func() { queuetest.CleanupBench(rdb, calls, 0) })
		queuetest.BenchSerial(b, p, calls[0])
	})
}
