package redisq

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/internal/batch"
)

// This file is the producer's share of lua/submit.lua, the script that
// admits a request and enqueues its jobs in one call (its caller, ingest,
// runs it through limits.Admitter.Submit): the enqueue's part of the call
// (SubmitPart), the errors it maps (SubmitError) and the metrics it counts
// (Observe), so a job enqueued that way is one as Enqueue makes it.

// Joins reports whether the producer's enqueue may run inside a script on
// rdb: it writes to that very client and waits for no replicas (with
// ProducerConfig.Wait the enqueue needs its WAIT, which submit.lua's
// round trip does not carry).
func (p *Producer) Joins(rdb redis.UniversalClient) bool {
	return rdb != nil && p.group.rdb == rdb && p.group.wait.Replicas == 0
}

// SubmitPart checks and encodes jobs, all of one tenant, as Enqueue does,
// and returns submit.lua's part of a decision after its admission: KEYS
// (queue, backlog, sequences, job states) and ARGV (n, seen, then
// enqueue.lua's ARGV). seen says a job's id may have been recorded before
// (a client's id): the script then runs enqueue.lua's resent-job checks;
// ids the caller just made skip them. An invalid job, or jobs of several
// tenants, is an error wrapping queue.ErrInvalidJob.
func (p *Producer) SubmitPart(jobs []queue.Envelope, seen bool) (keys []string, args []any, err error) {
	batches, err := batch.Prepare(jobs, p.clock.Now())
	if err != nil {
		return nil, nil, err
	}
	if len(batches) != 1 {
		return nil, nil, fmt.Errorf("%w: a submit holds jobs of %d tenants, want 1", queue.ErrInvalidJob, len(batches))
	}
	keys, args = enqueueArgs(&batches[0], 2)
	args[0], args[1] = len(jobs), 0
	if seen {
		args[1] = 1
	}
	return keys, args, nil
}

// SubmitError maps the error of a submit.lua call that carried tenant's
// enqueue as Enqueue maps its own: it wraps queue.ErrUnavailable, and
// queue.ErrUnknownOutcome too when the script may have run (a timeout, a
// cut connection, a reply of the wrong shape); nil stays nil.
func SubmitError(tenant string, err error) error {
	if err == nil {
		return nil
	}
	return joinFailures([]batch.Tenant{{Tenant: tenant}}, []error{err})
}

// Observe counts a submit of jobs enqueued (err nil) or failed, started at
// start, in the producer's metrics, as Enqueue counts itself.
func (p *Producer) Observe(start time.Time, jobs int, err error) {
	p.m.Observe(start, jobs, err)
}

// Timeout is the bound of one Enqueue (ProducerConfig.EnqueueTimeout), which
// a submit carrying the producer's enqueue takes too.
func (p *Producer) Timeout() time.Duration { return p.timeout }
