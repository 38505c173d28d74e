package jobstate

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// ConflictError is returned by Cancel for a job whose state forbids a
// cancel: in_flight, done, dead, cancelled or expired.
type ConflictError struct {
	JobID string
	// State is the job's state, unchanged.
	State string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("jobstate: job %s is %s; only a queued or retrying job can be cancelled", e.JobID, e.State)
}

// Cancel cancels tenant's job id when it is waiting (queued, or retrying:
// between two deliveries), with one check-and-set script
// (lua/job_state_cancel.lua), by Redis TIME. The drainer then drops the job
// when it reaches the head of its lane, without spending an outflow slot,
// and counts it; a drainer that claimed it just before still checks again
// when the delivery would start (StartReply). It returns ErrNotFound for a job
// with no recorded state and a *ConflictError for any other state.
func Cancel(ctx context.Context, rdb redis.Scripter, tenant, id string) error {
	v, err := cancelCall(tenant, id).Run(ctx, rdb).Result()
	if err != nil {
		return fmt.Errorf("jobstate: cancel %s of %s: %w", id, tenant, err)
	}
	return cancelReply(tenant, id, v)
}

// cancelCall is the call of job_state_cancel.lua for tenant's job id.
func cancelCall(tenant, id string) lua.Call {
	return lua.Call{Script: lua.JobStateCancel, Keys: []string{keys.JobState(tenant, id)}, Args: []any{keys.JobStateTTL.Milliseconds()}}
}

// cancelReply reads job_state_cancel.lua's reply {code, state} for
// tenant's job id: nil when cancelled (1), a *ConflictError (0), ErrNotFound
// (-1). Any other shape is an error wrapping lua.ErrReply.
func cancelReply(tenant, id string, v any) error {
	s := lua.JobStateCancel
	bad := func(err error) error { return fmt.Errorf("jobstate: cancel %s of %s: %w", id, tenant, err) }
	arr, err := s.Array(v, 2, 2)
	if err != nil {
		return bad(err)
	}
	code, err := s.Int(arr[0], "code")
	if err != nil {
		return bad(err)
	}
	state, err := s.String(arr[1], "state")
	if err != nil {
		return bad(err)
	}
	switch code {
	case 1:
		return nil
	case 0:
		return &ConflictError{JobID: id, State: state}
	case -1:
		return ErrNotFound
	default:
		return bad(s.ReplyError("code %d, want 1, 0 or -1", code))
	}
}
