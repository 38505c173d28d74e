package drainer_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// pushBulk queues n small jobs of tenant in one pipeline.
func pushBulk(b *testing.B, tenant string, n int) {
	rdb := testenv.Redis(b)
	ctx := context.Background()
	for start := 0; start < n; start += 10_000 {
		pipe := rdb.Pipeline()
		for i := start; i < min(n, start+10_000); i++ {
			e := queue.Envelope{Version: queue.EnvelopeVersion, ID: fmt.Sprintf("%s-%d", tenant, i), Tenant: tenant, Cost: 1, Payload: []byte(`{}`)}
			raw, _ := e.Encode()
			pipe.RPush(ctx, keys.Queue(tenant), raw)
		}
		pipe.IncrBy(ctx, keys.Backlog(tenant), int64(min(n, start+10_000)-start))
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { rdb.Del(context.Background(), keys.Queue(tenant), keys.Backlog(tenant)) })
}

// BenchmarkDrainerThroughputRedis measures jobs/s through one drainer with a
// no-op Handler and no outflow limit (Redis backend): claim, finish and the
// lane machinery, nothing else.
func BenchmarkDrainerThroughputRedis(b *testing.B) {
	rdb := testenv.Redis(b)
	tenant := testenv.Name(b, "tput")
	pushBulk(b, tenant, b.N)
	count, all := queuetest.CountTo(b.N)
	h := drainer.HandlerFunc(count)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	stop := run(b, drainer.Config{Redis: rdb, Settings: settings(), Handler: h, Tenants: map[string]config.Tenant{tenant: {}}})
	<-all
	el := time.Since(start)
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/el.Seconds(), "jobs/s")
}

// BenchmarkHeadOfLineRedis is requirement 3's figure on the Redis backend:
// tenant A holds a 100,000-job backlog drained at 10 jobs/s while tenant B
// submits b.N jobs at about 100/s; it reports B's dispatch delay (queued →
// at the sink) at p50 and p99.
func BenchmarkHeadOfLineRedis(b *testing.B) {
	rdb := testenv.Redis(b)
	a, bt := testenv.Name(b, "hol-a"), testenv.Name(b, "hol-b")
	pushBulk(b, a, 100_000)
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var delays []time.Duration
	got := make(chan struct{}, b.N)
	h := drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		if job.Tenant == bt {
			mu.Lock()
			delays = append(delays, time.Since(sent[job.ID]))
			mu.Unlock()
			got <- struct{}{}
		}
		return nil
	})
	run(b, drainer.Config{Redis: rdb, Settings: settings(), Handler: h, Tenants: map[string]config.Tenant{
		a:  {Outflow: config.Outflow{Rate: 10}},
		bt: {Outflow: config.Outflow{Rate: 1000}},
	}})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("%s-%d", bt, i)
		e := queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: bt, Cost: 1}
		raw, _ := e.Encode()
		mu.Lock()
		sent[id] = time.Now()
		mu.Unlock()
		rdb.RPush(context.Background(), keys.Queue(bt), raw)
		rdb.IncrBy(context.Background(), keys.Backlog(bt), 1)
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i < b.N; i++ {
		<-got
	}
	b.StopTimer()
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99_ms")
}
