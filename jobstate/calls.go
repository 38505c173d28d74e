package jobstate

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// QueuedJob is a job whose state becomes queued.
type QueuedJob struct {
	ID         string
	Type       string
	EnqueuedAt time.Time
	// Cost is the job's cost, kept in its state for a purge's backlog count.
	Cost int64
	// HeartbeatMS is a heartbeat job's interval (0: none), kept in its state.
	HeartbeatMS int64
}

// EnqueueCall is the call of job_state_enqueue.lua that records jobs, all
// of tenant and in their queue's order, as queued, each with the next seq
// (Kafka backend, after the broker's ack; the Redis backend records them in
// enqueue.lua), after it raises tenant's backlog counter (keys.Backlog) by
// raise cost units (>= 0; 0 leaves it) less what finishes that came before
// the raise owe it (keys.BacklogOwed), and refreshes its TTL: the Kafka
// producer's whole post-ack write for a tenant in one script call. With
// raise > 0 jobs may be empty. An error reply from past the script's
// argument check means the counter rose (the script raises it first); only
// the states are then in doubt. EnqueueReply reads its reply.
func EnqueueCall(tenant string, raise int64, jobs []QueuedJob) lua.Call {
	ks := make([]string, 0, 4+len(jobs))
	ks = append(ks, keys.JobSeq(tenant), keys.JobsDispatched(tenant), keys.Backlog(tenant), keys.BacklogOwed(tenant))
	args := make([]any, 0, 3+4*len(jobs))
	args = append(args, keys.JobStateTTL.Milliseconds(), raise, keys.BacklogTTL.Milliseconds())
	for _, j := range jobs {
		ks = append(ks, keys.JobState(tenant, j.ID))
		args = append(args, j.Type, j.EnqueuedAt.UnixMilli(), j.Cost, j.HeartbeatMS)
	}
	return lua.Call{Script: lua.JobStateEnqueue, Keys: ks, Args: args}
}

// Settle is the end of one delivery or a drop, as the Kafka backend records
// it (the Redis backend records it in ack.lua and lease_defer.lua).
type Settle struct {
	Tenant string
	JobID  string
	// Member is the delivery's member in keys.Delivering (the claim's
	// token).
	Member string
	// State is Done, Dead, Cancelled, Expired or Retrying.
	State string
	// LastError ("" keeps the recorded one) and Reason (of a dead job).
	LastError string
	Reason    string
	// DeadLetter, when not "", is the dead job's letter (dlq.Encode), written
	// to the tenant's keys.DeadRecords and dead index; it died at DiedAt
	// (zero: Redis TIME).
	DeadLetter string
	DiedAt     time.Time
	// Due is a Retrying job's retry time, its score in the retrying index
	// (keys.JobIndex); zero is Redis TIME.
	Due time.Time
	// Refresh is keys.Refresh's Due for the tenant: the caller's first
	// settle of the tenant in a wall second also trims the done index
	// (keys.DoneTrimEvery).
	Refresh bool
}

// Call is the call of job_state_settle.lua that records s; SettleReply
// reads its reply.
func (s Settle) Call() lua.Call {
	died, due := UnixMS(s.DiedAt), UnixMS(s.Due)
	t := s.Tenant
	return lua.Call{
		Script: lua.JobStateSettle,
		Keys: []string{keys.JobState(t, s.JobID), keys.JobsDispatched(t), keys.Delivering(t),
			keys.JobIndex(t, "dead"), keys.DeadRecords(t)},
		Args: []any{s.Member, s.State, s.LastError, s.Reason, keys.JobStateTTL.Milliseconds(), s.DeadLetter,
			keys.DeadTTL.Milliseconds(), died, keys.DeadMaxJobs, s.JobID, due, lua.Flag(s.Refresh)},
	}
}

// Dispatch is a drainer starting one delivery.
type Dispatch struct {
	Tenant string
	JobID  string
	// Member is the delivery's member in keys.Delivering (the claim's
	// token).
	Member string
	// Attempt is the least attempt number of the delivery (the envelope's
	// attempts + 1): the script records the job's recorded attempt + 1 when
	// that is higher (every start counts), and answers it (ReadStart).
	Attempt int
	// EnqueuedAt is the envelope's enqueued_at: a job recorded as done with
	// the same one is not started again (ReadStart's Duplicate). Zero skips
	// the check.
	EnqueuedAt time.Time
	// Lease is how long the delivery counts as in flight unless the
	// drainer extends it (lua/lease_extend.lua on keys.Delivering).
	Lease time.Duration
	// Source is the claimed copy's queue.Claimed.Source (a Kafka record's
	// partition): the start records it, and a start of a copy from another
	// Source while this one is in flight or retrying is refused as a
	// duplicate (ReadStart). "" on the Redis backend.
	Source string
	// Now is the instant, for tests; zero reads Redis TIME.
	Now time.Time
}

// Call is the call of job_state_dispatch.lua that records d in one round
// trip: the job is in flight, its seq has left the queue and the delivery
// counts as in flight (its cost joins the tenant's outflow through
// OutflowAdd, from the drainer's counts). StartReply
// reads its reply; the drainer runs it through a lua.Group, so concurrent
// starts share round trips.
func (d Dispatch) Call() lua.Call {
	var now, enq int64
	if !d.Now.IsZero() {
		now = d.Now.UnixMilli()
	}
	if !d.EnqueuedAt.IsZero() {
		enq = d.EnqueuedAt.UnixMilli()
	}
	return lua.Call{
		Script: lua.JobStateDispatch,
		Keys:   []string{keys.JobState(d.Tenant, d.JobID), keys.JobsDispatched(d.Tenant), keys.Delivering(d.Tenant)},
		Args: []any{max(d.Attempt, 1), d.Member, d.Lease.Milliseconds(), keys.JobStateTTL.Milliseconds(),
			keys.QueueTTL.Milliseconds(), now, enq, d.Source},
	}
}

// Start is job_state_dispatch.lua's answer to a Dispatch.
type Start struct {
	// Deliver reports that the delivery may start.
	Deliver bool
	// Attempt is the delivery's number (Sluice-Attempt) as the script
	// recorded it: 1 on the job's first start, one more on every start
	// after it. 0 when not delivering, or when the reply was unexpected
	// (the caller then uses its own count).
	Attempt int
	// Duplicate reports that the job is done already (a copy with the same
	// enqueued_at was delivered), or under way from a copy read from
	// another Source: it is not delivered.
	Duplicate bool
}

// ReadStart reads job_state_dispatch.lua's reply to a Dispatch's Call: n
// >= 1 delivers as attempt n, 0 drops (the job was cancelled after its
// claim), -1 drops a duplicate (done already, or under way from a copy of
// another Source). Any other reply is an error
// wrapping lua.ErrReply, and Deliver is then true: only the script's
// explicit 0 or -1 drops a job, so a stale record never holds a delivery
// back nor drops a job.
func ReadStart(v any) (Start, error) {
	s := lua.JobStateDispatch
	switch n, err := s.Int(v, "the reply"); {
	case err != nil:
		return Start{Deliver: true}, err
	case n >= 1 && n <= math.MaxInt32:
		return Start{Deliver: true, Attempt: int(n)}, nil
	case n == 0:
		return Start{}, nil
	case n == -1:
		return Start{Duplicate: true}, nil
	default:
		return Start{Deliver: true}, s.ReplyError("%d, want an attempt >= 1, 0 or -1", n)
	}
}

// StartReply is ReadStart's Deliver: false for a cancelled job or a
// duplicate, true otherwise (also with an error).
func StartReply(v any) (deliver bool, err error) {
	st, err := ReadStart(v)
	return st.Deliver, err
}

// EnqueueReply reads job_state_enqueue.lua's reply to an EnqueueCall of
// jobs jobs: the seq of the last job recorded, >= 1, or 0 for a call
// without jobs. Any other reply is an error wrapping lua.ErrReply (the jobs
// are queued either way; only their records are in doubt).
func EnqueueReply(v any, jobs int) (lastSeq int64, err error) {
	s := lua.JobStateEnqueue
	n, err := s.Int(v, "the reply")
	if err != nil {
		return 0, err
	}
	switch {
	case jobs == 0 && n != 0:
		return 0, s.ReplyError("seq %d for a call without jobs, want 0", n)
	case jobs > 0 && n < 1:
		return 0, s.ReplyError("seq %d, want >= 1", n)
	}
	return n, nil
}

// SettleReply reads job_state_settle.lua's reply to a Settle's Call: 1.
// Any other reply is an error wrapping lua.ErrReply (the job is finished
// either way; only its record is in doubt).
func SettleReply(v any) error {
	s := lua.JobStateSettle
	n, err := s.Int(v, "the reply")
	if err == nil && n != 1 {
		err = s.ReplyError("%d, want 1", n)
	}
	return err
}

// UnixMS is t as a script's time argument: unix ms, 0 for the zero time
// (the script reads Redis TIME then).
func UnixMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
