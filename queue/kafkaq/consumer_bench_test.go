package kafkaq_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// BenchmarkDrainerThroughputKafka measures jobs/s through one drainer on
// the Kafka backend with a no-op Handler and no outflow limit: fetch, FIFOs,
// claim, finish (one backlog script per job) and commits, nothing else. The
// b.N jobs of one tenant are produced before the timer starts.
func BenchmarkDrainerThroughputKafka(b *testing.B) {
	e := newKafkaEnv(b, 1)
	tenant := testenv.Name(b, "tput")
	e.enqueue(tenant, 0, b.N)
	count, all := queuetest.CountTo(b.N)
	h := drainer.HandlerFunc(count)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	c, stopConsumer := e.consumer(e.consumerConfig(), nil)
	stop := runDrainer(b, c, e.rdb, map[string]config.Tenant{tenant: {}}, h)
	<-all
	el := time.Since(start)
	b.StopTimer()
	stop()
	stopConsumer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "jobs/s")
}

// BenchmarkHeadOfLineKafka is requirement 3's figure on the Kafka backend:
// tenants A and B share one partition; A holds a 100,000-job backlog drained
// at 10 jobs/s, and B submits b.N jobs at about 100/s behind it. It reports
// B's dispatch delay (produced → at the handler) at p50 and p99, and
// first_ms, the delay of B's first job, which waits while the partition
// reader reads through A's backlog once (A's jobs past its FIFO bound are
// left in Kafka).
func BenchmarkHeadOfLineKafka(b *testing.B) {
	e := newKafkaEnv(b, 1)
	a, bt := testenv.Name(b, "hol-a"), testenv.Name(b, "hol-b")
	e.enqueue(a, 0, 100_000)
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var delays []time.Duration
	got := make(chan struct{}, b.N+1)
	h := drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		if job.Tenant == bt {
			mu.Lock()
			delays = append(delays, time.Since(sent[job.ID]))
			mu.Unlock()
			got <- struct{}{}
		}
		return nil
	})
	c, _ := e.consumer(e.consumerConfig(), nil)
	runDrainer(b, c, e.rdb, map[string]config.Tenant{
		a:  {Outflow: config.Outflow{Rate: 10}},
		bt: {Outflow: config.Outflow{Rate: 1000}},
	}, h)
	send := func(i int) {
		mu.Lock()
		sent[jobID(bt, i)] = time.Now()
		mu.Unlock()
		e.enqueue(bt, i, i+1)
	}
	send(0)
	<-got
	mu.Lock()
	first := delays[0]
	delays = delays[:0]
	mu.Unlock()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		send(i)
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i < b.N; i++ {
		<-got
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(first.Microseconds())/1000, "first_ms")
}
