package redisq

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/groupcommit"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/internal/batch"
)

// group lets concurrent Enqueue calls share round trips to Redis
// (group commit, internal/groupcommit): at most maxPipelines pipelines are
// in flight; the calls that arrive meanwhile wait, and the next pipeline
// carries the scripts of all of them. A call that finds a pipeline free is sent
// at once by its own goroutine. Each tenant's script is still atomic on its
// own; sharing a pipeline only saves round trips and system calls.
type group struct {
	rdb    redis.UniversalClient
	commit groupcommit.Group[*groupCall]
	wait   lua.Wait           // WAIT after the scripts (Replicas 0: none)
	short  prometheus.Counter // calls failed by a WAIT short of replicas

	sent  atomic.Int64 // pipelines sent (tests and benchmarks read it)
	calls atomic.Int64 // Enqueue calls they carried
}

// maxPipelines is how many pipelines may be in flight at once. Measured
// with BenchmarkEnqueue/redis (128 callers): 4 gave about 1.7 times the
// jobs/s of one pipeline per call, and more than 1 or 2 (see
// docs/adr/0003-queue-producers.md).
const maxPipelines = 4

// newGroup returns a group on rdb whose shared pipelines are bounded
// by timeout.
func newGroup(rdb redis.UniversalClient, timeout time.Duration) *group {
	g := &group{rdb: rdb}
	g.commit = groupcommit.Group[*groupCall]{MaxFlushes: maxPipelines, Timeout: timeout, Flush: g.run}
	return g
}

// groupCall is one Enqueue call's scripts. errs and done are written by the
// pipeline that carried them; errs is read only after done is closed.
type groupCall struct {
	batches []batch.Tenant
	errs    []error
	done    chan struct{}
}

// do runs batches (one script each) in a shared pipeline and returns nil
// when every script succeeded, else an error wrapping ErrUnavailable naming
// the failed tenants (and ErrUnknownOutcome when a script may have run). It
// returns ctx's error, wrapping ErrUnknownOutcome, when ctx ends first: the
// scripts may still run then.
func (g *group) do(ctx context.Context, batches []batch.Tenant) error {
	call := &groupCall{batches: batches, done: make(chan struct{})}
	g.commit.Do(ctx, call)
	if err := groupcommit.Wait(ctx, call.done); err != nil {
		return queue.UnknownOutcome("redis enqueue", err)
	}
	return joinFailures(call.batches, call.errs)
}

// run sends the scripts of calls in one pipeline and answers each call with
// its scripts' errors.
func (g *group) run(ctx context.Context, calls []*groupCall) {
	g.sent.Add(1)
	g.calls.Add(int64(len(calls)))
	var all []*batch.Tenant
	for _, c := range calls {
		for i := range c.batches {
			all = append(all, &c.batches[i])
		}
	}
	errs := runScripts(ctx, g.rdb, all, g.wait)
	for _, c := range calls {
		c.errs, errs = errs[:len(c.batches)], errs[len(c.batches):]
		if g.short != nil && waitShort(c.errs) {
			g.short.Inc()
		}
		close(c.done)
	}
}
