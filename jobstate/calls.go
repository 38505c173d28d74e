package jobstate

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// The scripts of this package.
var (
	enqueueScript  = lua.MustLoad("job_state_enqueue.lua")
	dispatchScript = lua.MustLoad("job_state_dispatch.lua")
	settleScript   = lua.Include("job_state_settle.lua", "job_state_final.lua")
	cancelScript   = lua.MustLoad("job_state_cancel.lua")
)

// Load loads the package's scripts (on every master of a cluster), so a
// broken one stops a service at start-up. Calls reload them on NOSCRIPT.
func Load(ctx context.Context, rdb redis.UniversalClient) error {
	for _, s := range []*lua.Script{enqueueScript, dispatchScript, settleScript, cancelScript} {
		if err := s.Load(ctx, rdb); err != nil {
			return fmt.Errorf("jobstate: %w", err)
		}
	}
	return nil
}

// Call is one call of a script: run it alone with Run, or put it in a
// pipeline with Pipe and, after the pipeline, Retry it when the script was
// not loaded there.
type Call struct {
	Script *lua.Script
	Keys   []string
	Args   []any
}

// Run runs the call (EVALSHA, reloading on NOSCRIPT).
func (c Call) Run(ctx context.Context, rdb redis.Scripter) *redis.Cmd {
	return c.Script.Run(ctx, rdb, c.Keys, c.Args...)
}

// Pipe queues the call's EVALSHA on p.
func (c Call) Pipe(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	return p.EvalSha(ctx, c.Script.SHA(), c.Keys, c.Args...)
}

// Retry returns cmd, or when cmd failed with NOSCRIPT (Redis restarted or
// flushed since the script was loaded) the result of running the call again
// with Run, which loads it.
func (c Call) Retry(ctx context.Context, rdb redis.Scripter, cmd *redis.Cmd) *redis.Cmd {
	if lua.IsNoScript(cmd.Err()) {
		return c.Run(ctx, rdb)
	}
	return cmd
}

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
func EnqueueCall(tenant string, jobs []QueuedJob) Call {
	ks := make([]string, 0, 2+len(jobs))
	ks = append(ks, keys.JobSeq(tenant), keys.JobsDispatched(tenant))
	args := make([]any, 0, 1+2*len(jobs))
	args = append(args, keys.JobStateTTL.Milliseconds())
	for _, j := range jobs {
		ks = append(ks, keys.JobState(tenant, j.ID))
		args = append(args, j.Type, j.EnqueuedAt.UnixMilli())
	}
	return Call{Script: enqueueScript, Keys: ks, Args: args}
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
func (s Settle) Call() Call {
	dlq := 0
	if s.DeadLettered {
		dlq = 1
	}
	return Call{
		Script: settleScript,
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
func (d Dispatch) Call() Call {
	var now int64
	if !d.Now.IsZero() {
		now = d.Now.UnixMilli()
	}
	return Call{
		Script: dispatchScript,
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
