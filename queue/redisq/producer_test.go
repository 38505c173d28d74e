package redisq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/internal/batch"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// newTestRedisProducer returns a Producer on rdb with its own registry and
// a fixed clock.
func newTestRedisProducer(t *testing.T, rdb redis.UniversalClient, now time.Time) (*Producer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := NewProducer(ProducerConfig{Redis: rdb, Registerer: reg, Clock: testenv.NewClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	return p, reg
}

// queued returns the decoded jobs on tenant's Redis list, head first.
func queued(t *testing.T, rdb redis.UniversalClient, tenant string) []queue.Envelope {
	t.Helper()
	raw, err := rdb.LRange(context.Background(), keys.Queue(tenant), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []queue.Envelope
	for _, r := range raw {
		e, err := queue.Decode([]byte(r))
		if err != nil {
			t.Fatalf("queued job of %s does not decode: %v", tenant, err)
		}
		out = append(out, e)
	}
	return out
}

func TestRedisProducerWritesListAndCounter(t *testing.T) {
	t.Parallel()
	clients := map[string]func(*testing.T) redis.UniversalClient{
		"standalone": func(t *testing.T) redis.UniversalClient { return testenv.Redis(t) },
		"cluster":    func(t *testing.T) redis.UniversalClient { return testenv.Cluster(t) },
	}
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			rdb := client(t)
			now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			p, reg := newTestRedisProducer(t, rdb, now)
			a, b := testenv.Name(t, "ta"), testenv.Name(t, "tb")
			ctx := context.Background()

			first := []queue.Envelope{queuetest.Job(a, "a1", 2), queuetest.Job(b, "b1", 1), queuetest.Job(a, "a2", 3)}
			if err := p.Enqueue(ctx, first); err != nil {
				t.Fatalf("Enqueue (two tenants): %v", err)
			}
			second := []queue.Envelope{queuetest.Job(a, "a3", 1)}
			if err := p.Enqueue(ctx, second); err != nil {
				t.Fatalf("Enqueue (one tenant): %v", err)
			}

			if diff := cmp.Diff(queuetest.Stored(now, first[0], first[2], second[0]), queued(t, rdb, a)); diff != "" {
				t.Errorf("queue of %s (-want +got):\n%s", a, diff)
			}
			if diff := cmp.Diff(queuetest.Stored(now, first[1]), queued(t, rdb, b)); diff != "" {
				t.Errorf("queue of %s (-want +got):\n%s", b, diff)
			}
			for tenant, want := range map[string]int64{a: 6, b: 1} {
				got, err := rdb.Get(ctx, keys.Backlog(tenant)).Int64()
				if err != nil || got != want {
					t.Errorf("backlog of %s = %d, %v; want %d", tenant, got, err, want)
				}
				for key, ttl := range map[string]time.Duration{keys.Queue(tenant): keys.QueueTTL, keys.Backlog(tenant): keys.BacklogTTL} {
					got, err := rdb.PTTL(ctx, key).Result()
					if err != nil || got <= ttl-time.Minute || got > ttl {
						t.Errorf("PTTL %s = %v, %v; want within a minute below %v", key, got, err, ttl)
					}
				}
			}
			if got := testenv.MetricValue(t, reg, "sluice_enqueued_jobs_total", map[string]string{"backend": "redis"}); got != 4 {
				t.Errorf("sluice_enqueued_jobs_total{backend=redis} = %v, want 4", got)
			}
			if n, err := testutil.GatherAndCount(reg, "sluice_enqueue_duration_seconds"); err != nil || n != 1 {
				t.Errorf("sluice_enqueue_duration_seconds series = %d, %v; want 1", n, err)
			}
		})
	}
}

// TestRedisProducerAtomic reads each tenant's list length and backlog in one
// MULTI while writers run: with every job of cost 1 the two must always be
// equal, which holds only if the script writes both at once.
func TestRedisProducerAtomic(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	p, _ := newTestRedisProducer(t, rdb, time.Now())
	tenant := testenv.Name(t, "atomic")
	ctx := context.Background()

	const writers, calls = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for c := range calls {
				jobs := []queue.Envelope{queuetest.Job(tenant, fmt.Sprintf("w%d-c%d-1", w, c), 1), queuetest.Job(tenant, fmt.Sprintf("w%d-c%d-2", w, c), 1)}
				if err := p.Enqueue(ctx, jobs); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reads := 0
	for stop := false; !stop; reads++ {
		select {
		case <-done:
			stop = true
		default:
		}
		var llen *redis.IntCmd
		var backlog *redis.StringCmd
		_, err := rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			llen = pipe.LLen(ctx, keys.Queue(tenant))
			backlog = pipe.Get(ctx, keys.Backlog(tenant))
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		n, _ := backlog.Int64()
		if llen.Val() != n {
			t.Fatalf("read %d: list length %d but backlog %d: list and counter written apart", reads, llen.Val(), n)
		}
	}
	close(errs)
	for err := range errs {
		t.Fatalf("Enqueue: %v", err)
	}
	if got := rdb.LLen(ctx, keys.Queue(tenant)).Val(); got != writers*calls*2 {
		t.Errorf("list length = %d, want %d", got, writers*calls*2)
	}
	t.Logf("%d consistent reads during %d writes", reads, writers*calls)
}

// TestRedisProducerManyJobs pushes more jobs than Lua's unpack() takes at
// once (8000), so the script's chunking is exercised.
func TestRedisProducerManyJobs(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	p, _ := newTestRedisProducer(t, rdb, time.Now())
	tenant := testenv.Name(t, "many")
	jobs := make([]queue.Envelope, 9001)
	for i := range jobs {
		jobs[i] = queuetest.Job(tenant, fmt.Sprintf("j%d", i), 1)
	}
	if err := p.Enqueue(context.Background(), jobs); err != nil {
		t.Fatal(err)
	}
	got := queued(t, rdb, tenant)
	if len(got) != len(jobs) || got[0].ID != "j0" || got[len(got)-1].ID != "j9000" {
		t.Fatalf("queued %d jobs from %v to %v, want 9001 from j0 to j9000 in order", len(got), got[0].ID, got[len(got)-1].ID)
	}
	if n, _ := rdb.Get(context.Background(), keys.Backlog(tenant)).Int64(); n != 9001 {
		t.Errorf("backlog = %d, want 9001", n)
	}
}

// TestRedisProducerSharesPipelines starts 50 Enqueue calls at once: they
// reach Redis in far fewer pipelines than calls, and every job is written.
func TestRedisProducerSharesPipelines(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	p, _ := newTestRedisProducer(t, rdb, time.Now())
	tenants := []string{testenv.Name(t, "g0"), testenv.Name(t, "g1"), testenv.Name(t, "g2")}
	const calls = 50
	gate := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			<-gate
			if err := p.Enqueue(context.Background(), []queue.Envelope{queuetest.Job(tenants[i%3], fmt.Sprintf("c%d", i), 1)}); err != nil {
				errs <- err
			}
		})
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Enqueue: %v", err)
	}
	pipelines, carried := p.group.sent.Load(), p.group.calls.Load()
	t.Logf("%d calls in %d pipelines", carried, pipelines)
	if carried != calls || pipelines > calls/2 {
		t.Errorf("%d calls in %d pipelines, want %d calls in at most %d", carried, pipelines, calls, calls/2)
	}
	total := 0
	for _, tenant := range tenants {
		total += len(queued(t, rdb, tenant))
	}
	if total != calls {
		t.Errorf("%d jobs queued, want %d", total, calls)
	}
}

func TestRedisProducerInvalidWritesNothing(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	p, reg := newTestRedisProducer(t, rdb, time.Now())
	tenant := testenv.Name(t, "inv")
	err := p.Enqueue(context.Background(), []queue.Envelope{queuetest.Job(tenant, "ok", 1), queuetest.Job(tenant, "zero", 0)})
	if !errors.Is(err, queue.ErrInvalidJob) {
		t.Fatalf("Enqueue with a cost-0 job = %v, want queue.ErrInvalidJob", err)
	}
	if n := rdb.Exists(context.Background(), keys.Queue(tenant), keys.Backlog(tenant)).Val(); n != 0 {
		t.Errorf("%d keys written for a refused call, want 0", n)
	}
	if got := testenv.MetricValue(t, reg, "sluice_enqueue_errors_total", map[string]string{"backend": "redis"}); got != 1 {
		t.Errorf("sluice_enqueue_errors_total = %v, want 1", got)
	}
}

// TestEnqueueScriptRefusesBadArgs calls enqueue.lua directly: bad TTLs or
// cost fail before any write.
func TestEnqueueScriptRefusesBadArgs(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tests := []struct {
		name string
		args []any
	}{
		{"cost 0", []any{1000, 1000, 0, "job"}},
		{"cost not a number", []any{1000, 1000, "x", "job"}},
		{"fractional cost", []any{1000, 1000, 1.5, "job"}},
		{"queue ttl 0", []any{0, 1000, 1, "job"}},
		{"no jobs", []any{1000, 1000, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant := testenv.Name(t, "args")
			err := lua.Enqueue.Run(ctx, rdb, enqueueCall(&batch.Tenant{Tenant: tenant}).Keys, tt.args...).Err()
			if err == nil {
				t.Fatalf("enqueue.lua %v = nil error, want a refusal", tt.args)
			}
			if n := rdb.Exists(ctx, enqueueCall(&batch.Tenant{Tenant: tenant}).Keys...).Val(); n != 0 {
				t.Errorf("%d keys written by a refused call, want 0", n)
			}
		})
	}
}

// TestRedisProducerDown stops a private Redis: Enqueue fails fast with
// queue.ErrUnavailable and nothing is claimed durable; after a restart (empty
// script cache) Enqueue works again without a new Load.
func TestRedisProducerDown(t *testing.T) {
	srv := testenv.StartRedis(t)
	// Timeouts as config.Redis gives them by default (250ms).
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr(), DialTimeout: 250 * time.Millisecond, ReadTimeout: 250 * time.Millisecond,
		WriteTimeout: 250 * time.Millisecond, ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { rdb.Close() })
	p, _ := newTestRedisProducer(t, rdb, time.Now())
	ctx := context.Background()
	multi := func(id string) []queue.Envelope {
		return []queue.Envelope{queuetest.Job("t1", id, 1), queuetest.Job("t2", id, 1)}
	}
	if err := p.Enqueue(ctx, multi("before")); err != nil {
		t.Fatal(err)
	}

	for _, fault := range []struct {
		name        string
		stop, start func()
	}{
		{"stopped", srv.Stop, srv.Start},
		{"paused", srv.Pause, srv.Resume},
	} {
		fault.stop()
		// Distinct ids: one id with one enqueued_at (the test clock) is one
		// job, which a second enqueue adds nothing to.
		for _, jobs := range [][]queue.Envelope{{queuetest.Job("t1", "during1-"+fault.name, 1)}, multi("during2-" + fault.name)} {
			start := time.Now()
			err := p.Enqueue(ctx, jobs)
			took := time.Since(start)
			if !errors.Is(err, queue.ErrUnavailable) {
				t.Errorf("%s: Enqueue(%d jobs) = %v, want an error wrapping queue.ErrUnavailable", fault.name, len(jobs), err)
			}
			if limit := DefaultEnqueueTimeout + 500*time.Millisecond; took > limit {
				t.Errorf("%s: Enqueue took %v to fail, want < %v", fault.name, took, limit)
			}
			t.Logf("%s: Enqueue failed after %v: %v", fault.name, took.Round(time.Millisecond), err)
		}
		fault.start()
		if err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job("t1", "after1-"+fault.name, 1)}); err != nil {
			t.Errorf("%s: Enqueue after recovery: %v", fault.name, err)
		}
		if err := p.Enqueue(ctx, multi("after2-"+fault.name)); err != nil {
			t.Errorf("%s: Enqueue of two tenants after recovery: %v", fault.name, err)
		}
	}
	// The stopped server restarted empty: t1 holds the 2 jobs written after
	// the restart and the 2 after the pause, plus those of the calls that
	// failed during the pause (0 to 2): a paused Redis still runs the commands
	// buffered in its socket when it resumes, although the client gave up.
	// queue.ErrUnavailable means "not known to be durable", not "not written".
	if got := len(queued(t, rdb, "t1")); got < 4 || got > 6 {
		t.Errorf("t1 holds %d jobs, want 4 to 6", got)
	}
}

// BenchmarkEnqueue measures enqueue throughput of one job (1 KiB payload)
// per call, from many concurrent callers, against the shared Redis.
func BenchmarkEnqueue(b *testing.B) {
	b.Run("redis", func(b *testing.B) {
		rdb := testenv.Redis(b)
		p := newBenchProducer(b, rdb)
		calls, size := queuetest.BenchJobs(b, queuetest.BenchEnv("SLUICE_BENCH_TENANTS", 64))
		queuetest.BenchEnqueue(b, p, rdb, calls, size)
	})
}

// BenchmarkEnqueueLatency calls Enqueue from one goroutine, so ns/op is the
// latency of one call with nothing to share a pipeline with.
func BenchmarkEnqueueLatency(b *testing.B) {
	b.Run("redis", func(b *testing.B) {
		rdb := testenv.Redis(b)
		p := newBenchProducer(b, rdb)
		calls, _ := queuetest.BenchJobs(b, 1)
		b.Cleanup(func() { queuetest.CleanupBench(rdb, calls, 0) })
		queuetest.BenchSerial(b, p, calls[0])
	})
}

func newBenchProducer(b *testing.B, rdb redis.UniversalClient) *Producer {
	p, err := NewProducer(ProducerConfig{Redis: rdb})
	if err != nil {
		b.Fatal(err)
	}
	return p
}
