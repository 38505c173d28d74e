// Package redisq is sluice's Redis queue backend: one list per tenant
// (keys.Queue), its Producer (ingest) and its Consumer (drainer), each
// step one Lua script whose Go twin is in scripts.go.
package redisq

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/internal/batch"
	"github.com/sluicehq/sluice/queue/internal/metrics"
)

// DefaultEnqueueTimeout bounds one Producer.Enqueue call, retries included,
// when ctx has no earlier deadline. A client built with
// ContextTimeoutEnabled also ends a read from a hung Redis at that deadline;
// otherwise its ReadTimeout bounds each attempt.
const DefaultEnqueueTimeout = time.Second

// ProducerConfig configures a Producer. The zero value (with Redis set) is
// usable.
type ProducerConfig struct {
	// Redis holds the queues. Required.
	Redis redis.UniversalClient
	// EnqueueTimeout bounds one Enqueue call (default
	// DefaultEnqueueTimeout).
	EnqueueTimeout time.Duration
	// Registerer receives the producer's metrics. Nil registers nothing (the
	// metrics still count).
	Registerer prometheus.Registerer
	// Clock gives a job's enqueued_at when the caller left it zero (default
	// clock.Real).
	Clock clock.Clock
	// Wait, when Wait.Replicas >= 1, makes every enqueue wait until that
	// many replicas have its writes (lua.Wait; see wait.go). Zero: no
	// wait.
	Wait lua.Wait
}

// Producer queues jobs on Redis: one list per tenant (keys.Queue), each job
// appended to its tail as envelope JSON, and the tenant's backlog counter
// (keys.Backlog, in cost units) raised by the jobs' cost in the same script
// (lua/enqueue.lua), so the list and the counter never disagree about a
// write. Both keys get their TTL (keys.QueueTTL, keys.BacklogTTL) on every
// write. The same script records each job's state "queued" (keys.JobState,
// see package jobstate).
//
// One Enqueue call costs at most one round trip: one EVALSHA per tenant,
// pipelined (a ClusterClient splits a pipeline by node), and with
// ProducerConfig.Wait a WAIT at the end of the same pipeline. Concurrent calls
// share pipelines: at most 4 are in flight, and the calls arriving
// meanwhile leave together in the next one, so under load many calls cost
// one round trip. A Producer is safe for concurrent use.
type Producer struct {
	group   *group
	timeout time.Duration
	m       *metrics.Producer
	clock   clock.Clock
}

// NewProducer returns a producer writing to cfg.Redis. It returns every
// error and logs nothing, so it takes no logger. The scripts are loaded by
// lua.LoadAll at the service's start.
func NewProducer(cfg ProducerConfig) (*Producer, error) {
	if cfg.Redis == nil {
		return nil, errors.New("redisq: producer: Redis is required")
	}
	m, err := metrics.NewProducer(cfg.Registerer, "redis")
	if err != nil {
		return nil, err
	}
	short, err := waitShortCounter(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	timeout := cfg.EnqueueTimeout
	if timeout <= 0 {
		timeout = DefaultEnqueueTimeout
	}
	g := newGroup(cfg.Redis, timeout)
	g.wait, g.short = cfg.Wait, short
	return &Producer{group: g, timeout: timeout, m: m, clock: clock.Or(cfg.Clock)}, nil
}

// Enqueue appends every job to its tenant's list and raises the tenant's
// backlog by the jobs' cost. It returns nil only when every script
// succeeded, within ctx and the enqueue timeout. A Redis error (or a reply
// of the wrong shape) wraps queue.ErrUnavailable; it means "not known to be
// durable": a Redis that was slow rather than down may still run the
// script: then the error wraps queue.ErrUnknownOutcome too, and enqueueing
// the same envelopes again (same id and enqueued_at) adds nothing for a job
// that was written (enqueue.lua skips it). With jobs of several tenants,
// each tenant's write is atomic, the call as a whole is not: the tenants
// named in an error wrapping only ErrUnavailable were not written, while the
// others may have been.
func (p *Producer) Enqueue(ctx context.Context, jobs []queue.Envelope) (err error) {
	if len(jobs) == 0 {
		return nil
	}
	start := time.Now()
	defer func() { p.m.Observe(start, len(jobs), err) }()
	batches, err := batch.Prepare(jobs, p.clock.Now())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	return p.group.do(ctx, batches)
}

// runScripts runs one enqueue.lua call per batch in one round trip
// (lua.Exec, with its NOSCRIPT rule), followed in the same pipeline by
// WAIT when wait.Replicas >= 1 (lua.ExecWait), and returns each batch's
// error.
func runScripts(ctx context.Context, rdb redis.UniversalClient, batches []*batch.Tenant, wait lua.Wait) []error {
	calls := make([]lua.Call, len(batches))
	for i, b := range batches {
		calls[i] = enqueueCall(b)
	}
	cmds, waitErr := lua.ExecWait(ctx, rdb, calls, wait)
	errs := make([]error, len(batches))
	for i, c := range cmds {
		if errs[i] = c.Err(); errs[i] == nil {
			_, _, errs[i] = parseEnqueue(c.Val())
		}
	}
	if waitErr != nil {
		shortOfReplicas(errs, waitErr)
	}
	return errs
}

// joinFailures returns nil when every err is nil, else an error wrapping
// queue.ErrUnavailable and the first failure, naming the failed tenants; it
// wraps queue.ErrUnknownOutcome too when a failed script may have run
// (lua.MayHaveRun).
func joinFailures(batches []batch.Tenant, errs []error) error {
	var failed []string
	var first error
	unknown := false
	for i, err := range errs {
		if err != nil {
			failed = append(failed, batches[i].Tenant)
			unknown = unknown || lua.MayHaveRun(err)
			if first == nil {
				first = err
			}
		}
	}
	if first == nil {
		return nil
	}
	op := "redis enqueue for " + strings.Join(failed, ",")
	if unknown {
		return queue.UnknownOutcome(op, first)
	}
	return queue.Unavailable(op, first)
}

// Close releases nothing: the Redis client belongs to the caller.
func (p *Producer) Close() error { return nil }
