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
// in_flight, the in_flight index and the dispatched sequence, as
// jobstate.Dispatch does; its lease is its delivery in progress
// (queue.Claimed.InLease), not keys.Delivering. The others (cancelled, done
// already, with a deadline or a heartbeat, poison) come as Claim hands them
// out. k is clamped to [1, TakeMax]. With no job it returns nil and Claim's
// wait. It implements queue.Taker.
func (c *Consumer) Take(ctx context.Context, tenant string, k int) ([]*queue.Claimed, time.Duration, error) {
	jobs, _, wait, err := c.take(ctx, tenant, takeArgs{K: k})
	return jobs, wait, err
}

// TakeTurn is Take for a tenant whose outflow is shaped (rate units/s,
// capacity units; both > 0): up to k head jobs (clamped to [1, TakeMax]),
// each started only when the tenant's shared bucket (keys.Water, with the
// override and the adaptive rate as outflow.Bucket reads them) gives it its
// turn in the same call, in queue order. When no turn is free it pops
// nothing and returns turn.Wait > 0; a turn due within ahead is granted now
// with the job's SendDelay, the time to wait before its send (so no send is
// early and no second ask is made): one call takes as many turns as fall
// due within ahead. A first job that is not plain, or whose cost exceeds
// the capacity, comes alone, unstarted, and has taken no turn. It
// implements queue.TurnTaker.
func (c *Consumer) TakeTurn(ctx context.Context, tenant string, k int, rate, capacity float64, ahead time.Duration) ([]*queue.Claimed, queue.Turn, time.Duration, error) {
	if err := queue.CheckTurn(tenant, rate, capacity, ahead); err != nil {
		return nil, queue.Turn{}, 0, err
	}
	return c.take(ctx, tenant, takeArgs{K: k, Rate: rate, Capacity: capacity, Ahead: ahead})
}

func (c *Consumer) take(ctx context.Context, tenant string, a takeArgs) ([]*queue.Claimed, queue.Turn, time.Duration, error) {
	a.Tenant, a.Lease, a.K = tenant, c.cfg.Lease, min(max(a.K, 1), TakeMax)
	a.Token = c.prefix + "." + strconv.FormatUint(c.seq.Add(1), 36)
	v, err := c.takes.Do(ctx, a.Call())
	if err != nil {
		return nil, queue.Turn{}, 0, queue.Unavailable("take "+tenant, err)
	}
	r, err := parseTake(v, a.K)
	if err != nil {
		return nil, queue.Turn{}, 0, fmt.Errorf("queue: take %s: %w", tenant, err)
	}
	turn := queue.Turn{Water: float64(r.WaterMicro) / 1e6, Rate: float64(r.RateMilli) / 1e3, At: time.UnixMicro(r.NowUS)}
	if len(r.Jobs) == 0 {
		turn.Wait = time.Duration(r.WaitUS) * time.Microsecond
		wait := c.emptyWait(r.NextDueMS, 0)
		if turn.Wait > 0 {
			wait = 0
		}
		return nil, turn, wait, nil
	}
	turn.Next = time.Duration(r.WaitUS) * time.Microsecond // the turn after the ones granted
	jobs := make([]*queue.Claimed, len(r.Jobs))
	nowMS := r.nowMS()
	for i, jr := range r.Jobs {
		jr.NowMS = nowMS
		job := c.claimed(tenant, jr.claimReply)
		job.SendDelay = time.Duration(jr.DelayUS) * time.Microsecond
		if jr.Attempt > 0 {
			job.Started = int(jr.Attempt)
			// The recorded attempt counts only for this life of the job
			// (job_state_dispatch.lua's rule): another enqueued_at starts
			// from the envelope's attempts.
			if job.DecodeErr == nil && job.Envelope.EnqueuedAt.UnixMilli() != jr.EnqueuedMS {
				job.Started = job.Envelope.Attempt + 1
			}
			job.Started = max(job.Started, job.Envelope.Attempt+1)
			job.InLease, job.Counted = true, true
			job.CountedAt = (nowMS + jr.DelayUS/1000) / 1000 // take.lua's second of the send
		}
		jobs[i] = job
	}
	return jobs, turn, 0, nil
}

// takeArgs are lua/take.lua's arguments: lease up to K head jobs of Tenant
// under tokens Token.<i> for Lease.
type takeArgs struct {
	Tenant string
	Lease  time.Duration
	Token  string
	K      int
	// Rate and Capacity are the outflow bucket's (0: no bucket); a turn due
	// within Ahead is granted now for a later send.
	Rate, Capacity float64
	Ahead          time.Duration
}

// Call returns the script call.
func (a takeArgs) Call() lua.Call {
	t := a.Tenant
	c := lua.Call{Script: lua.Take,
		Keys: []string{keys.Queue(t), keys.Processing(t), keys.Leased(t), keys.Delayed(t), keys.JobsDispatched(t), keys.Outflow(t)},
		Args: []any{0, a.Lease.Milliseconds(), a.Token, keys.QueueTTL.Milliseconds(), promoteMax, keys.JobState(t, ""),
			a.K, keys.JobStateTTL.Milliseconds(), 0, 0, 0, 0, keys.OutflowTTL.Milliseconds()}}
	if a.Rate > 0 {
		c.Keys = append(c.Keys, keys.Water(t), keys.Override(t))
		c.Args[8], c.Args[9] = strconv.FormatFloat(a.Rate, 'f', -1, 64), strconv.FormatFloat(a.Capacity, 'f', -1, 64)
		c.Args[10], c.Args[11] = keys.WaterMargin.Milliseconds(), a.Ahead.Microseconds()
	}
	return c
}

// takeReply is one job of take.lua's reply: claim.lua's fields, the
// attempt number of a start recorded by the take (0: not started), the
// recorded enqueued_at of a started job and the delay before its send (a
// turn granted ahead).
type takeReply struct {
	claimReply
	Attempt    int64
	EnqueuedMS int64
	DelayUS    int64
}

// takeHead and takeFields are how many reply elements take.lua gives
// before the jobs and per job.
const (
	takeHead   = 6
	takeFields = 8
)

// takeResult is take.lua's whole reply.
type takeResult struct {
	NowUS, NextDueMS              int64
	WaitUS, WaterMicro, RateMilli int64
	Jobs                          []takeReply
}

// nowMS is the call's clock in ms, the now of the reply's other times.
func (r takeResult) nowMS() int64 { return r.NowUS / 1000 }

// parseTake checks take.lua's reply {now_us, next_due_ms, n, wait_us,
// water_micro, rate_milli, n × {member, envelope, cancelled, beat_ms,
// done_ms, attempt, enqueued_ms, delay_us}} for a take of at most k jobs
// (wait_us is the refused turn's wait when n is 0, the next turn's after the
// granted ones else): a job count outside [0, k] or not matching the length,
// a negative wait, level, rate or delay, and a delay of an unstarted job are
// refused, as is a clock not after the epoch.
func parseTake(v any, k int) (takeResult, error) {
	s := lua.Take
	var r takeResult
	arr, err := s.Array(v, takeHead, takeHead+takeFields*k)
	if err != nil {
		return r, err
	}
	head, err := s.Ints(arr[:takeHead], takeHead)
	if err != nil {
		return r, err
	}
	r.NowUS, r.NextDueMS, r.WaitUS, r.WaterMicro, r.RateMilli = head[0], head[1], head[3], head[4], head[5]
	n := int(head[2])
	switch {
	case r.NowUS <= 0:
		return r, s.ReplyError("clock %d µs, want after the epoch", r.NowUS)
	case n < 0 || n > k || len(arr) != takeHead+takeFields*n:
		return r, s.ReplyError("%d jobs in a reply of %d elements (k %d)", n, len(arr), k)
	case r.WaitUS < 0 || r.WaterMicro < 0 || r.RateMilli < 0:
		return r, s.ReplyError("wait %d µs, water %d, rate %d: want none negative", r.WaitUS, r.WaterMicro, r.RateMilli)
	}
	r.Jobs = make([]takeReply, n)
	for i := range r.Jobs {
		if r.Jobs[i], err = parseTakeJob(arr[takeHead+takeFields*i : takeHead+takeFields*(i+1)]); err != nil {
			return r, err
		}
	}
	return r, nil
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
	if n[5] < 0 || n[5] > queue.TurnAheadMax.Microseconds() || (n[5] > 0 && n[3] == 0) {
		return r, s.ReplyError("delay %d µs for attempt %d, want 0, or in (0, %d] for a started job", n[5], n[3], queue.TurnAheadMax.Microseconds())
	}
	r.Cancelled, r.BeatMS, r.DoneMS, r.Attempt, r.EnqueuedMS, r.DelayUS = n[0] == 1, n[1], n[2], n[3], n[4], n[5]
	return r, nil
}
