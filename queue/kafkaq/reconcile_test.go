package kafkaq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// TestBacklogReconciledAfterRedisReturns: jobs Kafka acknowledged while
// Redis was down (admitted fail-open) are counted in the tenant's backlog,
// and recorded queued, within about a second of Redis coming back; the
// counts wait in the producer meanwhile.
func TestBacklogReconciledAfterRedisReturns(t *testing.T) {
	t.Parallel()
	proc := testenv.StartRedis(t, "--appendonly", "yes")
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	p := newTestKafkaProducer(t, kafkaTestConfig(t, testenv.KafkaBrokers(t), 2), rdb)
	ctx := context.Background()
	tenant := testenv.Name(t, "rec")
	enqueue := func(from, to int) {
		jobs := make([]queue.Envelope, 0, to-from)
		for i := from; i < to; i++ {
			jobs = append(jobs, queuetest.Job(tenant, fmt.Sprintf("r%04d", i), 2))
		}
		if err := p.Enqueue(ctx, jobs); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(0, 10)
	proc.Stop()
	enqueue(10, 400) // durable in Kafka; Redis cannot take the counts
	proc.Start()
	start := time.Now()
	// Both within the bound: on a restarted Redis (no scripts) the counter
	// is raised in the first pipeline and the states written in a second
	// one (EVAL after NOSCRIPT, lua.Exec), so the count can be seen first.
	testenv.WaitFor(t, 5*time.Second, "the backlog counts every acknowledged job and their states are recorded", func() bool {
		n, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int64()
		r, err := jobstate.Get(ctx, rdb, tenant, "r0399")
		return n == 2*400 && err == nil && r.State == jobstate.Queued && r.Seq != 0
	})
	t.Logf("backlog reconciled %v after Redis came back", time.Since(start).Round(time.Millisecond))
	if r, err := jobstate.Get(ctx, rdb, tenant, "r0399"); err != nil || r.State != jobstate.Queued || r.Seq == 0 {
		t.Errorf("a job acknowledged while Redis was down: %+v, %v; want queued with a seq", r, err)
	}
	if err := p.Close(); err != nil { // and once more by the test's cleanup: a second Close does nothing
		t.Fatal(err)
	}
}
