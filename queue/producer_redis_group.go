package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisGroup lets concurrent Enqueue calls share round trips to Redis
// (group commit): at most redisPipelines pipelines are in flight; the calls
// that arrive meanwhile wait, and the next pipeline carries the scripts of
// all of them. A call that finds a free slot is sent at once by its own
// goroutine. Each tenant's
// script is still atomic on its own; sharing a pipeline only saves round
// trips and system calls.
type redisGroup struct {
	rdb     redis.UniversalClient
	timeout time.Duration // bounds one shared pipeline

	mu       sync.Mutex
	pending  []*redisCall
	inflight int

	pipelines atomic.Int64 // pipelines sent (tests and benchmarks read it)
	calls     atomic.Int64 // Enqueue calls they carried
}

// redisPipelines is how many pipelines may be in flight at once. Measured
// with BenchmarkEnqueue/redis (128 callers): 4 gave about 1.7 times the
// jobs/s of one pipeline per call, and more than 1 or 2 (see
// docs/adr/0003-queue-producers.md).
const redisPipelines = 4

// redisCall is one Enqueue call's scripts. errs and done are written by the
// pipeline that carried them; errs is read only after done is closed.
type redisCall struct {
	batches []tenantBatch
	errs    []error
	done    chan struct{}
}

// do runs batches (one script each) in a shared pipeline and returns nil
// when every script succeeded, else an error wrapping ErrUnavailable naming
// the failed tenants. It returns ctx's error when ctx ends first; the
// scripts may still run then.
func (g *redisGroup) do(ctx context.Context, batches []tenantBatch) error {
	g.mu.Lock()
	if g.inflight < redisPipelines {
		// A free slot: send this call at once, from this goroutine, and hand
		// the slot to a drainer if calls queued up meanwhile.
		g.inflight++
		g.mu.Unlock()
		errs := g.run(ctx, []*redisCall{{batches: batches}})
		g.release()
		return joinFailures(batches, errs)
	}
	call := &redisCall{batches: batches, done: make(chan struct{})}
	g.pending = append(g.pending, call)
	g.mu.Unlock()
	select {
	case <-call.done:
		return joinFailures(call.batches, call.errs)
	case <-ctx.Done():
		return wrapUnavailable("redis enqueue", ctx.Err())
	}
}

// release gives up a pipeline slot, or keeps it for a drainer when calls
// are waiting.
func (g *redisGroup) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.inflight--
		return
	}
	go g.drain()
}

// drain sends every pending call in one pipeline, and again while calls
// arrived meanwhile; then it gives up its slot.
func (g *redisGroup) drain() {
	for {
		g.mu.Lock()
		calls := g.pending
		g.pending = nil
		if len(calls) == 0 {
			g.inflight--
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		errs := g.run(ctx, calls)
		cancel()
		for _, c := range calls {
			c.errs, errs = errs[:len(c.batches)], errs[len(c.batches):]
			close(c.done)
		}
	}
}

// run sends the scripts of calls in one pipeline and returns their errors
// in order.
func (g *redisGroup) run(ctx context.Context, calls []*redisCall) []error {
	g.pipelines.Add(1)
	g.calls.Add(int64(len(calls)))
	var all []*tenantBatch
	for _, c := range calls {
		for i := range c.batches {
			all = append(all, &c.batches[i])
		}
	}
	return runScripts(ctx, g.rdb, all)
}
