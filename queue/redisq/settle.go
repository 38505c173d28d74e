package redisq

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// Finish ends the job's lease, writes out.Dead (when not nil) to the
// tenant's dead letters (dlq.Encode into keys.DeadRecords and the dead
// index keys.JobIndex(t, "dead"), trimmed to their bounds), lowers the backlog by the job's cost
// and records the job's state (out.State; package jobstate), in one script
// (lua/ack.lua). It returns queue.ErrLeaseLost when the lease had expired
// and the job was returned to the queue. Concurrent Finishes share round
// trips, and a tenant's concurrent Finishes one ack.lua call (newFinishGroup).
func (c *Consumer) Finish(ctx context.Context, job *queue.Claimed, out queue.Outcome) error {
	id := job.Envelope.ID
	rec := ""
	if out.Dead != nil {
		var err error
		if rec, err = dlq.Encode(*out.Dead, job.Raw); err != nil {
			return fmt.Errorf("queue: finish %s: %w", id, err)
		}
	}
	state, lastErr, reason := out.State()
	held, err := c.finishes.Do(ctx, ackArgs{
		Tenant: job.Envelope.Tenant, JobID: id, Member: job.Token(), Cost: job.Envelope.Cost,
		DeadLetter: rec, DiedAt: deadAt(out), State: state, LastError: lastErr, Reason: reason,
		Refresh: c.refresh.Due(job.Envelope.Tenant, c.clock.Now()), InLease: job.InLease,
	})
	if errors.Is(err, lua.ErrReply) {
		// Not known to be finished: the lease expires and the job comes
		// again (at least once), never lost to a reply read as success.
		return fmt.Errorf("queue: finish %s: %w", id, err)
	}
	if err != nil {
		return unavailable("finish "+id, err)
	}
	if !held {
		return fmt.Errorf("queue: finish %s: %w", id, queue.ErrLeaseLost)
	}
	return nil
}

// Defer ends the job's lease and puts r.Next (the job with its attempt
// count updated) into the tenant's delayed set, due after r.Delay, and
// records the job's state retrying with r.LastError, in one script
// (lua/lease_defer.lua); a later Claim moves it back to the head of the
// queue.
func (c *Consumer) Defer(ctx context.Context, job *queue.Claimed, r queue.Retry) error {
	id := job.Envelope.ID
	b, err := r.Next.Encode()
	if err != nil {
		return fmt.Errorf("queue: defer %s: %w", id, err)
	}
	v, err := deferArgs{
		Tenant: job.Envelope.Tenant, JobID: id, Member: job.Token(),
		Delay: r.Delay, Envelope: b, LastError: r.LastError,
	}.Call().Run(ctx, c.rdb).Result()
	if err != nil {
		return unavailable("defer "+id, err)
	}
	due, err := parseDefer(v)
	if err != nil {
		return fmt.Errorf("queue: defer %s: %w", id, err)
	}
	if due == 0 {
		return fmt.Errorf("queue: defer %s: %w", id, queue.ErrLeaseLost)
	}
	return nil
}

// Release ends the job's lease and puts it back at the head of its queue
// (lua/release.lua).
func (c *Consumer) Release(ctx context.Context, job *queue.Claimed) error {
	id := job.Envelope.ID
	v, err := releaseArgs{Tenant: job.Envelope.Tenant, Member: job.Token(), Envelope: job.Raw}.Call().Run(ctx, c.rdb).Result()
	if err != nil {
		return unavailable("release "+id, err)
	}
	held, err := parseHeld(lua.Release, v)
	if err != nil {
		return fmt.Errorf("queue: release %s: %w", id, err)
	}
	if !held {
		return fmt.Errorf("queue: release %s: %w", id, queue.ErrLeaseLost)
	}
	return nil
}

// Untake is Release for a job its take started (queue.Claimed.Started)
// that was not sent: the lease ends, the job goes back to the head of its
// queue and, in the same call, its recorded start is undone (state queued,
// the attempt number back), so its next start sends the number this one
// would have. It implements queue.Untaker.
func (c *Consumer) Untake(ctx context.Context, job *queue.Claimed) error {
	id := job.Envelope.ID
	a := releaseArgs{Tenant: job.Envelope.Tenant, Member: job.Token(), Envelope: job.Raw, JobID: id, Started: job.Started}
	v, err := a.Call().Run(ctx, c.rdb).Result()
	if err != nil {
		return unavailable("release "+id, err)
	}
	held, err := parseHeld(lua.Release, v)
	if err != nil {
		return fmt.Errorf("queue: release %s: %w", id, err)
	}
	if !held {
		return fmt.Errorf("queue: release %s: %w", id, queue.ErrLeaseLost)
	}
	return nil
}

// reapMax bounds how many expired leases one Reap call returns.
const reapMax = 1000

// Reap returns tenant's expired leases (deadline before Redis TIME) to the
// head of its queue (lua/reap.lua) and reports how many it returned.
func (c *Consumer) Reap(ctx context.Context, tenant string) (int, error) {
	return c.reapAt(ctx, tenant, 0)
}

func (c *Consumer) reapAt(ctx context.Context, tenant string, nowMS int64) (int, error) {
	v, err := reapArgs{Tenant: tenant, NowMS: nowMS, Max: reapMax}.Call().Run(ctx, c.rdb).Result()
	if err != nil {
		return 0, queue.Unavailable("reap "+tenant, err)
	}
	n, err := parseReap(v)
	if err != nil {
		return 0, fmt.Errorf("queue: reap %s: %w", tenant, err)
	}
	return n, nil
}

// deadAt is when out's job died in unix ms (0: Redis TIME).
func deadAt(out queue.Outcome) int64 {
	if out.Dead == nil || out.Dead.At.IsZero() {
		return 0
	}
	return out.Dead.At.UnixMilli()
}

// unavailable is a settle's failed call: queue.NoReply when it got no reply
// (lua.NoReply; every settle script acts only while the lease is held, so
// the drainer may send it again), else queue.Unavailable.
func unavailable(op string, err error) error {
	if lua.NoReply(err) {
		return queue.NoReply(op, err)
	}
	return queue.Unavailable(op, err)
}
