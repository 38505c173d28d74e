package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// Job is one job to schedule: its envelope (as the queue will get it) and
// the time before which it is not delivered.
type Job struct {
	Envelope queue.Envelope
	Due      time.Time
}

// FullError is returned by Add when the tenant's scheduled jobs would
// exceed the bound it was given (ingest.max_scheduled).
type FullError struct {
	Tenant string
	// Count is how many scheduled jobs the tenant holds; Max the bound.
	Count, Max int64
}

func (e *FullError) Error() string {
	return fmt.Sprintf("scheduler: tenant %s holds %d scheduled jobs, the most allowed is %d", e.Tenant, e.Count, e.Max)
}

// ErrHint wraps the error of Add's second write, the global hint
// (keys.ScheduledTenants), after the jobs were stored: they are durable and
// are moved when due once a scheduler's sweep finds them (Config.Sweep,
// 10 s), so the caller logs it and answers as stored.
var ErrHint = errors.New("scheduler: hint not written")

// Add stores tenant's jobs until they are due, in one script
// (lua/schedule_add.lua: the scheduled index keys.JobIndex(t,"scheduled"),
// the envelopes in keys.ScheduledJobs, each job's state "scheduled" with
// due_at), then lowers the tenant's due hint (ZADD LT keys.ScheduledTenants,
// a second round trip: the hint is not tenant-scoped). When the tenant
// would hold more than max scheduled jobs, nothing is written and the
// error is a *FullError. A job id already scheduled is replaced.
func Add(ctx context.Context, rdb redis.UniversalClient, tenant string, jobs []Job, max int64) error {
	return AddWait(ctx, rdb, tenant, jobs, max, lua.Wait{})
}

// AddWait is Add whose script is followed, in its round trip, by WAIT
// (lua.ExecWait; w zero: none), as ingest stores the jobs it answers 202
// for with redis.wait_replicas. Fewer replicas than w.Replicas is an error
// wrapping lua.ErrWaitShort, queue.ErrUnavailable and
// queue.ErrUnknownOutcome (as the Redis queue backend's short WAIT),
// returned after the hint is written: the jobs are stored on the primary and
// may survive or not. A script that may have run without its answer
// reaching the caller (a timeout, a cut connection: lua.MayHaveRun) or with
// an answer of the wrong shape wraps queue.ErrUnknownOutcome too; an error
// that shows it never ran (no connection, an error reply) does not. A retry with the same ids and enqueued_at replaces
// them, or skips those the scheduler has moved (schedule_add.lua).
func AddWait(ctx context.Context, rdb redis.UniversalClient, tenant string, jobs []Job, max int64, w lua.Wait) error {
	call, err := addCall(tenant, jobs, max)
	if err != nil {
		return err
	}
	cmds, waitErr := lua.ExecWait(ctx, rdb, []lua.Call{call}, w)
	v, err := cmds[0].Result()
	if err != nil {
		if lua.MayHaveRun(err) { // a timeout or a cut connection: the jobs may be stored
			return fmt.Errorf("scheduler: add jobs of %s: %w: %w: %w", tenant, queue.ErrUnavailable, queue.ErrUnknownOutcome, err)
		}
		return fmt.Errorf("scheduler: add jobs of %s: %w", tenant, err)
	}
	stored, n, err := parseAdd(v)
	if err != nil { // the script ran: the jobs may be stored
		return fmt.Errorf("scheduler: add jobs of %s: %w: %w", tenant, queue.ErrUnknownOutcome, err)
	}
	if !stored {
		return &FullError{Tenant: tenant, Count: n, Max: max}
	}
	if err := lowerHint(ctx, rdb, tenant, n); err != nil && waitErr == nil {
		return fmt.Errorf("%w: %w", ErrHint, err)
	}
	if waitErr != nil {
		return fmt.Errorf("scheduler: add jobs of %s: %w: %w: %w", tenant, queue.ErrUnavailable, queue.ErrUnknownOutcome, waitErr)
	}
	return nil
}

// addCall is lua/schedule_add.lua for tenant's jobs.
func addCall(tenant string, jobs []Job, max int64) (lua.Call, error) {
	ks := make([]string, 0, 2+len(jobs))
	ks = append(ks, keys.JobIndex(tenant, "scheduled"), keys.ScheduledJobs(tenant))
	args := make([]any, 0, 2+6*len(jobs))
	args = append(args, max, keys.JobStateTTL.Milliseconds())
	for _, j := range jobs {
		e := j.Envelope
		b, err := e.Encode()
		if err != nil {
			return lua.Call{}, fmt.Errorf("scheduler: add: %w", err)
		}
		ks = append(ks, keys.JobState(tenant, e.ID))
		args = append(args, e.ID, j.Due.UnixMilli(), b, e.Type, e.EnqueuedAt.UnixMilli(), e.HeartbeatMS)
	}
	return lua.Call{Script: lua.ScheduleAdd, Keys: ks, Args: args}, nil
}

// parseAdd checks schedule_add.lua's reply {1, earliest due ms} or {0,
// count}.
func parseAdd(v any) (stored bool, n int64, err error) {
	s := lua.ScheduleAdd
	r, err := s.Ints(v, 2)
	if err != nil {
		return false, 0, err
	}
	if r[0] != 0 && r[0] != 1 {
		return false, 0, s.ReplyError("code %d, want 1 or 0", r[0])
	}
	return r[0] == 1, r[1], nil
}

// lowerHint lowers tenant's score in the global hint to dueMS (ZADD LT:
// an earlier hint stays).
func lowerHint(ctx context.Context, rdb redis.UniversalClient, tenant string, dueMS int64) error {
	return rdb.ZAddLT(ctx, keys.ScheduledTenants(), redis.Z{Score: float64(dueMS), Member: tenant}).Err()
}

// Cancel cancels tenant's job id when it is scheduled (lua/schedule_cancel.lua:
// it leaves the scheduled index and hash, state cancelled). For a job in any
// other state it changes nothing and returns false with that state ("" when
// none is recorded), for jobstate.Cancel to decide.
func Cancel(ctx context.Context, rdb redis.Scripter, tenant, id string) (cancelled bool, state string, err error) {
	t := tenant
	v, err := lua.Call{Script: lua.ScheduleCancel,
		Keys: []string{keys.JobState(t, id), keys.JobIndex(t, "scheduled"), keys.ScheduledJobs(t), keys.ScheduledMoving(t)},
		Args: []any{id, keys.JobStateTTL.Milliseconds()}}.Run(ctx, rdb).Result()
	if err != nil {
		return false, "", fmt.Errorf("scheduler: cancel %s of %s: %w", id, tenant, err)
	}
	cancelled, state, err = parseCancel(v)
	if err != nil {
		return false, "", fmt.Errorf("scheduler: cancel %s of %s: %w", id, tenant, err)
	}
	return cancelled, state, nil
}

// parseCancel checks schedule_cancel.lua's reply {1|0, state}.
func parseCancel(v any) (bool, string, error) {
	s := lua.ScheduleCancel
	arr, err := s.Array(v, 2, 2)
	if err != nil {
		return false, "", err
	}
	code, err := s.Int(arr[0], "code")
	if err != nil {
		return false, "", err
	}
	state, err := s.String(arr[1], "state")
	if err != nil {
		return false, "", err
	}
	if code != 0 && code != 1 {
		return false, "", s.ReplyError("code %d, want 1 or 0", code)
	}
	return code == 1, state, nil
}
