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
// when the delivery would start (Start). It returns ErrNotFound for a job
// with no recorded state and a *ConflictError for any other state.
func Cancel(ctx context.Context, rdb redis.Scripter, tenant, id string) error {
	res, err := lua.JobStateCancel.Run(ctx, rdb, []string{keys.JobState(tenant, id)}, keys.JobStateTTL.Milliseconds()).Slice()
	if err != nil {
		return fmt.Errorf("jobstate: cancel %s of %s: %w", id, tenant, err)
	}
	if len(res) != 2 {
		return fmt.Errorf("jobstate: cancel %s of %s: reply has %d values, want 2", id, tenant, len(res))
	}
	code, ok1 := res[0].(int64)
	state, ok2 := res[1].(string)
	if !ok1 || !ok2 {
		return fmt.Errorf("jobstate: cancel %s of %s: reply types %T %T", id, tenant, res[0], res[1])
	}
	switch code {
	case 1:
		return nil
	case 0:
		return &ConflictError{JobID: id, State: state}
	case -1:
		return ErrNotFound
	default:
		return fmt.Errorf("jobstate: cancel %s of %s: job_state_cancel.lua answered code %d, want 1, 0 or -1", id, tenant, code)
	}
}
