package queue

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// enqueueScript is lua/enqueue.lua: RPUSH of one tenant's envelopes onto
// keys.Queue, INCRBY of keys.Backlog by their cost, and each job's state
// "queued" with its enqueue seq (package jobstate), with their TTLs, in one
// atomic script.

// DefaultRedisEnqueueTimeout bounds one RedisProducer.Enqueue call,
// retries included, when ctx has no earlier deadline. A client built with
// ContextTimeoutEnabled also ends a read from a hung Redis at that deadline;
// otherwise its ReadTimeout bounds each attempt.
const DefaultRedisEnqueueTimeout = time.Second

// RedisProducer queues jobs on Redis: one list per tenant (keys.Queue), each
// job appended to its tail as envelope JSON, and the tenant's backlog counter
// (keys.Backlog, in cost units) raised by the jobs' cost in the same script,
// so the list and the counter never disagree about a write. Both keys get
// their TTL (keys.QueueTTL, keys.BacklogTTL) on every write. The same script
// records each job's state "queued" (keys.JobState, see package jobstate).
//
// One Enqueue call costs at most one round trip: one EVALSHA per tenant,
// pipelined (a ClusterClient splits a pipeline by node). Concurrent calls
// share pipelines: at most 4 are in flight, and the calls arriving
// meanwhile leave together in the next one, so under load many calls cost
// one round trip. A RedisProducer is safe for concurrent use.
type RedisProducer struct {
	rdb     redis.UniversalClient
	group   *redisGroup
	timeout time.Duration
	m       *producerMetrics
	now     func() time.Time
}

// NewRedisProducer returns a producer writing to rdb and registering its
// metrics on reg (nil: unregistered). It returns every error and logs
// nothing, so it takes no logger. Call Load before the first Enqueue so a
// broken script stops the start.
func NewRedisProducer(rdb redis.UniversalClient, reg prometheus.Registerer) (*RedisProducer, error) {
	if rdb == nil {
		return nil, fmt.Errorf("queue: redis producer: no redis client")
	}
	m, err := newProducerMetrics(reg, "redis")
	if err != nil {
		return nil, err
	}
	return &RedisProducer{
		rdb: rdb, group: newRedisGroup(rdb, DefaultRedisEnqueueTimeout),
		timeout: DefaultRedisEnqueueTimeout, m: m, now: time.Now,
	}, nil
}

// Enqueue appends every job to its tenant's list and raises the tenant's
// backlog by the jobs' cost. It returns nil only when every script
// succeeded, within ctx and DefaultRedisEnqueueTimeout. A Redis error wraps
// ErrUnavailable; it means "not known to be durable": a Redis that was slow
// rather than down may still run the script. With jobs of several
// tenants, the tenants named in the error were not written while the others
// may have been (each tenant's write is atomic, the call as a whole is not).
func (p *RedisProducer) Enqueue(ctx context.Context, jobs []Envelope) (err error) {
	if len(jobs) == 0 {
		return nil
	}
	start := time.Now()
	defer func() { p.m.observe(start, len(jobs), err) }()
	batches, err := prepareJobs(jobs, p.now())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	return p.group.do(ctx, batches)
}

// runScripts runs one enqueue.lua call per batch in one round trip
// (lua.Exec, with its NOSCRIPT rule) and returns each batch's error.
func runScripts(ctx context.Context, rdb redis.UniversalClient, batches []*tenantBatch) []error {
	calls := make([]lua.Call, len(batches))
	for i, b := range batches {
		calls[i] = lua.Call{Script: lua.Enqueue, Keys: enqueueBatchKeys(b), Args: enqueueArgs(b)}
	}
	errs := make([]error, len(batches))
	for i, c := range lua.Exec(ctx, rdb, calls, nil) {
		errs[i] = c.Err()
	}
	return errs
}

// joinFailures returns nil when every err is nil, else an error wrapping
// ErrUnavailable and the first failure, naming the failed tenants.
func joinFailures(batches []tenantBatch, errs []error) error {
	var failed []string
	var first error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, batches[i].tenant)
			if first == nil {
				first = err
			}
		}
	}
	if first == nil {
		return nil
	}
	return wrapUnavailable("redis enqueue for "+strings.Join(failed, ","), first)
}

// enqueueKeys is KEYS[1..4] of enqueue.lua: queue, backlog, enqueue
// sequence, dispatched sequence.
func enqueueKeys(tenant string) []string {
	return []string{keys.Queue(tenant), keys.Backlog(tenant), keys.JobSeq(tenant), keys.JobsDispatched(tenant)}
}

// enqueueBatchKeys is KEYS of enqueue.lua for b: enqueueKeys, then each
// job's state hash.
func enqueueBatchKeys(b *tenantBatch) []string {
	ks := make([]string, 0, 4+len(b.jobs))
	ks = append(ks, enqueueKeys(b.tenant)...)
	for _, j := range b.jobs {
		ks = append(ks, keys.JobState(b.tenant, j.ID))
	}
	return ks
}

// enqueueArgs is ARGV of enqueue.lua: queue TTL ms, backlog TTL ms, cost,
// job state TTL ms, envelopes, then each job's type and enqueued_at (unix
// ms).
func enqueueArgs(b *tenantBatch) []any {
	args := make([]any, 0, 4+3*len(b.values))
	args = append(args, keys.QueueTTL.Milliseconds(), keys.BacklogTTL.Milliseconds(), b.cost, keys.JobStateTTL.Milliseconds())
	for _, v := range b.values {
		args = append(args, v)
	}
	for _, j := range b.jobs {
		args = append(args, j.Type, j.EnqueuedAt.UnixMilli())
	}
	return args
}

// Close releases nothing: the Redis client belongs to the caller.
func (p *RedisProducer) Close() error { return nil }
