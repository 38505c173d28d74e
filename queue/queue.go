// Package queue is the contract between sluice's services and its queue
// backends: the versioned job envelope, the Producer (ingest) and Consumer
// (drainer) interfaces, the claimed job and its outcomes, and the errors
// every backend returns. The backends live in their own packages
// (queue/redisq: one Redis list per tenant; queue/kafkaq: one Kafka topic),
// queue/backend builds the configured one, and queue/queuetest is the
// conformance suite both run.
//
// A Producer's Enqueue returns nil only when every job it was given is durable
// on the backend: acknowledged by all in-sync Kafka replicas, or written to
// Redis together with the tenant's backlog counter in one script. ingest
// answers 202 only after that.
package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrUnavailable wraps every error that means the backend could not be
// reached or did not acknowledge; ingest answers it with 503 + Retry-After.
var ErrUnavailable = errors.New("queue: backend unavailable")

// ErrUnknownOutcome wraps every Enqueue error after which the jobs may or
// may not be stored: a produce request sent but not acknowledged in time, a
// Redis script sent but not answered, WAIT short of its replicas. Such an
// error wraps ErrUnavailable too (errors.Is holds for both). A caller that
// enqueues the same envelopes again (same id, same enqueued_at) gets at most
// one job delivered: the Redis enqueue skips a job already recorded with the
// same enqueued_at, and a drainer settles a copy of a job already done as a
// duplicate without delivering it.
var ErrUnknownOutcome = errors.New("queue: outcome unknown")

// UnknownOutcome marks err, an error from the backend during op after which
// the write may have happened, as ErrUnknownOutcome and ErrUnavailable:
// "queue: op: backend unavailable: outcome unknown: err".
func UnknownOutcome(op string, err error) error {
	return fmt.Errorf("queue: %s: %w: %w: %w", op, ErrUnavailable, ErrUnknownOutcome, err)
}

// ErrInvalidJob wraps every error a Producer returns for a job it refuses
// before talking to the backend (an invalid tenant, no id, a cost below 1, a
// job larger than the backend accepts). Nothing of that Enqueue call was
// written. ingest answers it with a 4xx, never with a retry.
var ErrInvalidJob = errors.New("queue: invalid job")

// ErrLeaseLost is returned when a job is finished, deferred or released
// after its lease was lost (it expired and the job went back to the queue):
// the job will be delivered again, which at-least-once delivery allows.
var ErrLeaseLost = errors.New("queue: lease lost")

// Unavailable marks err, an error from the backend during op, as
// ErrUnavailable while keeping err itself in the chain for errors.Is and
// errors.As: "queue: op: backend unavailable: err".
func Unavailable(op string, err error) error {
	return fmt.Errorf("queue: %s: %w: %w", op, ErrUnavailable, err)
}

// ErrNoReply marks a settle (Finish, Defer, Release, Untake) whose call got
// no reply from the backend (lua.NoReply: never sent, or cut or timed out
// before the answer), on a backend whose settles act only while the job's
// lease is held, so sending it again is safe: a second send after a first
// that ran finds the lease gone and writes nothing. The drainer sends such
// a settle again, keeping the job's lease, instead of letting the lease
// expire and the job be delivered again. It also wraps ErrUnavailable.
var ErrNoReply = errors.New("no reply; safe to send again")

// NoReply wraps err (a call that got no reply) in ErrUnavailable and
// ErrNoReply for op ("finish <id>").
func NoReply(op string, err error) error {
	return fmt.Errorf("queue: %s: %w: %w: %w", op, ErrUnavailable, ErrNoReply, err)
}

// Producer durably enqueues jobs.
type Producer interface {
	// Enqueue makes every job durable and returns nil, or returns an error
	// (wrapping ErrUnavailable when the backend is down). Jobs of one call
	// may belong to different tenants. It is safe for concurrent use, and
	// concurrent calls share round trips where the backend allows.
	Enqueue(ctx context.Context, jobs []Envelope) error
	// Close flushes and releases the producer.
	Close() error
}

// Holder is a Consumer that can tell whether a job it handed out is still
// the caller's to deliver: a Kafka job whose partition a rebalance is
// letting go is not (its next owner hands it out again). A drainer asks
// just before it starts a job that waited for a concurrency slot or an
// outflow turn, and gives back one it no longer holds, so the two owners
// never both deliver it.
type Holder interface {
	Holds(job *Claimed) bool
}

// Checker is a Producer that can tell, without writing anything, that
// Enqueue would refuse jobs (an error wrapping ErrInvalidJob: Kafka's
// produce request bound). Jobs stored for later (scheduled) are checked
// with it when stored and again when due, so one Enqueue would refuse never
// waits in the store.
type Checker interface {
	Check(jobs []Envelope) error
}

// Consumer is the drain side of a queue backend, organised per tenant so a
// drainer can run one lane (its per-tenant loop) per tenant and no tenant
// waits behind another. Every job is delivered at least once: a job stays on
// the backend until Finish, and a drainer that dies holding jobs leaves them
// to be delivered again (a reaper returns expired Redis leases; Kafka
// redelivers uncommitted offsets). Implementations are safe for concurrent
// use; queue/queuetest holds the cases every one passes.
type Consumer interface {
	// Tenants lists the tenants that may have jobs.
	Tenants(ctx context.Context) ([]string, error)
	// Claim takes the next job of tenant. When there is none it returns a
	// nil job and how long the caller may wait before asking again (a retry
	// falling due, or a poll interval).
	Claim(ctx context.Context, tenant string) (*Claimed, time.Duration, error)
	// Extend keeps jobs claimed for tenant held for another lease period. It
	// returns the jobs whose lease was already lost.
	Extend(ctx context.Context, tenant string, jobs []*Claimed) ([]*Claimed, error)
	// Finish ends a job as out says (delivered, dropped unsent, or dead),
	// writes the dead-letter record of a dead one, lowers the tenant's
	// backlog by the job's cost and records the job's state (out.State;
	// package jobstate; nothing for a duplicate, Outcome.Duplicate). It returns ErrLeaseLost when the job's claim was
	// lost meanwhile.
	Finish(ctx context.Context, job *Claimed, out Outcome) error
	// Defer holds the job aside for r.Delay and then hands it out again as
	// r.Next (the same job, its attempt count updated), and records the
	// job's state retrying with r.LastError. The tenant's other jobs go on
	// meanwhile.
	Defer(ctx context.Context, job *Claimed, r Retry) error
	// Release hands the job out again now, unchanged (a drainer stopping).
	Release(ctx context.Context, job *Claimed) error
}

// Taker is a Consumer that claims up to k jobs of a tenant in one call and
// records, in the same call, the delivery start of each job that needs no
// check of the drainer's before it starts (Claimed.Started > 0): a plain
// job, not cancelled, not done, without a deadline or a heartbeat. A
// drainer takes only for a tenant whose outflow has no gate in the backend
// (no rate, no concurrency cap), since a started job has spent no turn.
// Jobs it did not start are handed out as Claim hands them (Started 0).
// With no job it answers as Claim does.
type Taker interface {
	Take(ctx context.Context, tenant string, k int) ([]*Claimed, time.Duration, error)
}

// Untaker is a Taker that can give back a job its take started
// (Claimed.Started) before it was sent: Untake is Release, and undoes the
// recorded start in the same step, so the next start's attempt number and
// the job's state are as if this one never happened.
type Untaker interface {
	Untake(ctx context.Context, job *Claimed) error
}

// BatchExtender is a Consumer that extends the leases of every tenant's held
// jobs in one step (one round trip per lease tick for the whole drainer):
// ExtendAll answers, per tenant, what Extend would (the jobs whose lease was
// lost), and the error of each tenant whose extension failed.
type BatchExtender interface {
	ExtendAll(ctx context.Context, held map[string][]*Claimed) (lost map[string][]*Claimed, errs map[string]error)
}

// JobWaiter is a Taker whose Take waits for jobs to arrive when there are
// none (Kafka's, up to its ClaimWait). WaitJobs waits the same way and
// reports whether the tenant has a job to hand out now, taking nothing, so
// a caller can reserve room for the take only then.
type JobWaiter interface {
	WaitJobs(ctx context.Context, tenant string) bool
}

// TurnTaker is a Taker that also takes a shaped tenant's outflow turns in
// the same call: TakeTurn claims up to k jobs (a backend may take fewer:
// Kafka's stops at a job of another cost, or one it cannot start) and
// starts each only when the tenant's shared bucket
// (rate units/s, capacity units) gives it its turn, in queue order; when
// none is free it claims nothing and answers Turn.Wait > 0. A job it did
// not start has taken no turn.
//
// A turn due within ahead (at most TurnAheadMax) is granted at once with
// the job's Claimed.SendDelay: its cost is in the bucket now and the caller
// sends it SendDelay after the answer, so no send is early and no second
// ask is made.
type TurnTaker interface {
	TakeTurn(ctx context.Context, tenant string, k int, rate, capacity float64, ahead time.Duration) ([]*Claimed, Turn, time.Duration, error)
}

// TurnAheadMax bounds a TurnTaker's ahead: a job granted ahead waits that
// long held by its drainer, where a pause or a cancel no longer stops it.
const TurnAheadMax = time.Second

// CheckTurn is the one check of a TakeTurn's numbers, which every TurnTaker
// runs before its call: rate and capacity finite and > 0, ahead in
// [0, TurnAheadMax].
func CheckTurn(tenant string, rate, capacity float64, ahead time.Duration) error {
	if !(rate > 0) || !(capacity > 0) || math.IsInf(rate, 0) || math.IsInf(capacity, 0) {
		return fmt.Errorf("queue: take %s: rate %v and capacity %v must be > 0", tenant, rate, capacity)
	}
	if ahead < 0 || ahead > TurnAheadMax {
		return fmt.Errorf("queue: take %s: ahead %v must be in [0, %v]", tenant, ahead, TurnAheadMax)
	}
	return nil
}

// Turn is a TurnTaker's answer about the bucket: Wait > 0 when no turn was
// free (nothing claimed: ask again after it); Next, when jobs were claimed
// with their turns, the time until the bucket frees a further turn of cost
// 1 (0: free now, or the backend does not tell), so the caller need not ask
// before it (other drainers' turns only fill the bucket, so no ask before
// Next can be granted unless the rate or capacity is raised meanwhile); the
// level after the call (units) and the rate it used (units/s).
type Turn struct {
	Wait, Next  time.Duration
	Water, Rate float64
	// At is the bucket's clock when it answered (Redis TIME; the bucket's
	// last write when the call is behind it): a job granted a turn falls
	// due at At + its SendDelay on that clock. Zero when the backend does
	// not tell.
	At time.Time
}

// Prober is a Consumer that tells, for many tenants in one step (one round
// trip on Redis, none on Kafka), which of them a lane should drain now
// (ready): a job to claim, a retry falling due within within, or a lease
// past its deadline to return; expired lists those of ready with such a
// lease (Redis; the caller reaps them). A drainer runs lanes only for ready
// tenants, so an idle tenant costs it no goroutine, only its share of the
// probe. Both answers are subsets of tenants, in their order.
type Prober interface {
	Probe(ctx context.Context, tenants []string, within time.Duration) (ready, expired []string, err error)
}
