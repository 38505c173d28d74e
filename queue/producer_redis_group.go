package queue

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/groupcommit"
)

// redisGroup lets concurrent Enqueue calls share round trips to Redis
// (group commit, internal/groupcommit): at most redisPipelines pipelines are
// in flight; the calls that arrive meanwhile wait, and the next pipeline
// carries the scripts of all of them. A call that finds a free slot is sent
// at once by its own goroutine. Each tenant's script is still atomic on its
// own; sharing a pipeline only saves round trips and system calls.
type redisGroup struct {
	rdb   redis.UniversalClient
	group groupcommit.Group[*redisCall]

	pipelines atomic.Int64 // pipelines sent (tests and benchmarks read it)
	calls     atomic.Int64 // Enqueue calls they carried
}

// redisPipelines is how many pipelines may be in flight at once. Measured
// with BenchmarkEnqueue/redis (128 callers): 4 gave about 1.7 times the
// jobs/s of one pipeline per call, and more than 1 or 2 (see
// docs/adr/0003-queue-producers.md).
const redisPipelines = 4

// newRedisGroup returns a group on rdb whose shared pipelines are bounded
// by timeout.
func newRedisGroup(rdb redis.UniversalClient, timeout time.Duration) *redisGroup {
	g := &redisGroup{rdb: rdb}
	g.group = groupcommit.Group[*redisCall]{Slots: redisPipelines, Timeout: timeout, Flush: g.run}
	return g
}

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
	call := &redisCall{batches: batches, done: make(chan struct{})}
	g.group.Do(ctx, call)
	if err := groupcommit.Wait(ctx, call.done); err != nil {
		return wrapUnavailable("redis enqueue", err)
	}
	return joinFailures(call.batches, call.errs)
}

// run sends the scripts of calls in one pipeline and answers each call with
// its scripts' errors.
func (g *redisGroup) run(ctx context.Context, calls []*redisCall) {
	g.pipelines.Add(1)
	g.calls.Add(int64(len(calls)))
	var all []*tenantBatch
	for _, c := range calls {
		for i := range c.batches {
			all = append(all, &c.batches[i])
		}
	}
	errs := runScripts(ctx, g.rdb, all)
	for _, c := range calls {
		c.errs, errs = errs[:len(c.batches)], errs[len(c.batches):]
		close(c.done)
	}
}
