package jobstate

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// QueuedJob is a job whose state becomes queued.
type QueuedJob struct {
	ID         string
	Type       string
	EnqueuedAt time.Time
}

// EnqueueCall is the call of job_state_enqueue.lua that records jobs, all
// of tenant and in their queue's order, as queued, each with the next seq
// (Kafka backend, after the broker's ack; the Redis backend records them in
// enqueue.lua).
func EnqueueCall(tenant string, jobs []QueuedJob) lua.Call {
	ks := make([]string, 0, 2+len(jobs))
	ks = append(ks, keys.JobSeq(tenant), keys.JobsDispatched(tenant))
	args := make([]any, 0, 1+2*len(jobs))
	args = append(args, keys.JobStateTTL.Milliseconds())
	for _, j := range jobs {
		ks = append(ks, keys.JobState(tenant, j.ID))
		args = append(args, j.Type, j.EnqueuedAt.UnixMilli())
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
	// DeadLettered adds one to the tenant's keys.DLQCount.
	DeadLettered bool
}

// Call is the call of job_state_settle.lua that records s.
func (s Settle) Call() lua.Call {
	dlq := 0
	if s.DeadLettered {
		dlq = 1
	}
	return lua.Call{
		Script: lua.JobStateSettle,
		Keys:   []string{keys.JobState(s.Tenant, s.JobID), keys.JobsDispatched(s.Tenant), keys.Delivering(s.Tenant), keys.DLQCount(s.Tenant)},
		Args: []any{s.Member, s.State, s.LastError, s.Reason, keys.JobStateTTL.Milliseconds(), dlq,
			keys.QueueTTL.Milliseconds()},
	}
}

// Dispatch is a drainer starting one delivery.
type Dispatch struct {
	Tenant string
	JobID  string
	// Member is the delivery's member in keys.Delivering (the claim's
	// token).
	Member string
	// Attempt is the delivery's Sluice-Attempt (1 on the first).
	Attempt int
	// Cost is the job's cost in units, added to the tenant's outflow of
	// this second (keys.Outflow).
	Cost int64
	// Lease is how long the delivery counts as in flight unless the
	// drainer extends it (lua/lease_extend.lua on keys.Delivering).
	Lease time.Duration
	// Now is the instant, for tests; zero reads Redis TIME.
	Now time.Time
}

// Call is the call of job_state_dispatch.lua for d.
func (d Dispatch) Call() lua.Call {
	var now int64
	if !d.Now.IsZero() {
		now = d.Now.UnixMilli()
	}
	return lua.Call{
		Script: lua.JobStateDispatch,
		Keys:   []string{keys.JobState(d.Tenant, d.JobID), keys.JobsDispatched(d.Tenant), keys.Delivering(d.Tenant), keys.Outflow(d.Tenant)},
		Args: []any{d.Attempt, d.Member, d.Lease.Milliseconds(), max(d.Cost, 1), keys.JobStateTTL.Milliseconds(),
			keys.QueueTTL.Milliseconds(), keys.OutflowTTL.Milliseconds(), now},
	}
}

// Start records d in one round trip: the job is in flight, its seq has
// left the queue, the delivery counts as in flight and its cost in the
// tenant's outflow. It returns false, writing nothing, when the job was
// cancelled after it was claimed (the script's answer 0): the caller must
// drop it unsent. On a Redis error, or a reply other than 0 or 1, it
// returns true with the error: the job's record is stale, but a delivery
// is never held back, nor a job dropped, for it.
func Start(ctx context.Context, rdb redis.Scripter, d Dispatch) (bool, error) {
	v, err := d.Call().Run(ctx, rdb).Result()
	if err != nil {
		return true, fmt.Errorf("jobstate: start %s of %s: %w", d.JobID, d.Tenant, err)
	}
	deliver, ok := StartReply(v)
	if !ok {
		return true, fmt.Errorf("jobstate: start %s of %s: job_state_dispatch.lua answered %v, want 0 or 1", d.JobID, d.Tenant, v)
	}
	return deliver, nil
}

// StartReply reads job_state_dispatch.lua's reply: 1 delivers, 0 drops (the
// job was cancelled after its claim). Any other reply is unexpected (ok
// false) and delivers: only the script's explicit 0 drops a job.
func StartReply(v any) (deliver, ok bool) {
	switch n, isInt := v.(int64); {
	case isInt && n == 1:
		return true, true
	case isInt && n == 0:
		return false, true
	}
	return true, false
}
