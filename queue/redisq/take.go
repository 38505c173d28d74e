package redisq

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// TakeMax is the most jobs one Take leases (take.lua's bound on k).
const TakeMax = 64

// Take leases up to k head jobs of tenant in one call (lua/take.lua), first
// moving due retries to the head, and records the delivery start of each
// plain job among them (queue.Claimed.Started: its attempt number): state
// in_flight, the in_flight index, the dispatched sequence and the deliveries
// in progress, as jobstate.Dispatch does. The others (cancelled, done
// already, with a deadline or a heartbeat, poison) come as Claim hands them
// out. k is clamped to [1, TakeMax]. With no job it returns nil and Claim's
// wait. It implements queue.Taker.
func (c *Consumer) Take(ctx context.Context, tenant string, k int) ([]*queue.Claimed, time.Duration, error) {
	k = min(max(k, 1), TakeMax)
	token := c.prefix + "." + strconv.FormatUint(c.seq.Add(1), 36)
	v, err := takeArgs{Tenant: tenant, Lease: c.cfg.Lease, Token: token, K: k}.Call().Run(ctx, c.rdb).Result()
	if err != nil {
		return nil, 0, queue.Unavailable("take "+tenant, err)
	}
	now, nextDue, rs, err := parseTake(v, k)
	if err != nil {
		return nil, 0, fmt.Errorf("queue: take %s: %w", tenant, err)
	}
	if len(rs) == 0 {
		return nil, c.emptyWait(nextDue, 0), nil
	}
	jobs := make([]*queue.Claimed, len(rs))
	for i, r := range rs {
		r.NowMS = now
		job := c.claimed(tenant, r.claimReply)
		if r.Attempt > 0 {
			job.Started = int(r.Attempt)
			// The recorded attempt counts only for this life of the job
			// (job_state_dispatch.lua's rule): another enqueued_at starts
			// from the envelope's attempts.
			if job.DecodeErr == nil && job.Envelope.EnqueuedAt.UnixMilli() != r.EnqueuedMS {
				job.Started = job.Envelope.Attempt + 1
			}
			job.Started = max(job.Started, job.Envelope.Attempt+1)
		}
		jobs[i] = job
	}
	return jobs, 0, nil
}

// takeArgs are lua/take.lua's arguments: lease up to K head jobs of Tenant
// under tokens Token.<i> for Lease.
type takeArgs struct {
	Tenant string
	Lease  time.Duration
	Token  string
	K      int
}

// Call returns the script call.
func (a takeArgs) Call() lua.Call {
	t := a.Tenant
	return lua.Call{Script: lua.Take,
		Keys: []string{keys.Queue(t), keys.Processing(t), keys.Leased(t), keys.Delayed(t), keys.JobsDispatched(t), keys.Delivering(t)},
		Args: []any{0, a.Lease.Milliseconds(), a.Token, keys.QueueTTL.Milliseconds(), promoteMax, keys.JobState(t, ""),
			a.K, keys.JobStateTTL.Milliseconds()}}
}

// takeReply is one job of take.lua's reply: claim.lua's fields, the
// attempt number of a start recorded by the take (0: not started) and the
// recorded enqueued_at of a started job.
type takeReply struct {
	claimReply
	Attempt    int64
	EnqueuedMS int64
}

// takeFields is how many reply elements take.lua gives per job.
const takeFields = 7

// parseTake checks take.lua's reply {now_ms, next_due_ms, n, n × {member,
// envelope, cancelled, beat_ms, done_ms, attempt, enqueued_ms}} for a take
// of at most k jobs.
func parseTake(v any, k int) (now, nextDue int64, out []takeReply, err error) {
	s := lua.Take
	arr, err := s.Array(v, 3, 3+takeFields*k)
	if err != nil {
		return 0, 0, nil, err
	}
	head, err := s.Ints(arr[:3], 3)
	if err != nil {
		return 0, 0, nil, err
	}
	now, nextDue = head[0], head[1]
	n := int(head[2])
	if n < 0 || n > k || len(arr) != 3+takeFields*n {
		return 0, 0, nil, s.ReplyError("%d jobs in a reply of %d elements (k %d)", n, len(arr), k)
	}
	out = make([]takeReply, n)
	for i := range out {
		if out[i], err = parseTakeJob(arr[3+takeFields*i : 3+takeFields*(i+1)]); err != nil {
			return 0, 0, nil, err
		}
	}
	return now, nextDue, out, nil
}

// parseTakeJob checks one job's takeFields elements.
func parseTakeJob(f []any) (takeReply, error) {
	s := lua.Take
	var r takeReply
	var err error
	if r.Member, err = s.String(f[0], "member"); err != nil {
		return r, err
	}
	if r.Envelope, err = s.String(f[1], "envelope"); err != nil {
		return r, err
	}
	if r.Member == "" {
		return r, s.ReplyError("a job without a member")
	}
	n, err := s.Ints(f[2:], takeFields-2)
	if err != nil {
		return r, err
	}
	if n[0] != 0 && n[0] != 1 {
		return r, s.ReplyError("cancelled is %d, want 0 or 1", n[0])
	}
	if n[3] < 0 {
		return r, s.ReplyError("attempt is %d, want >= 0", n[3])
	}
	r.Cancelled, r.BeatMS, r.DoneMS, r.Attempt, r.EnqueuedMS = n[0] == 1, n[1], n[2], n[3], n[4]
	return r, nil
}
