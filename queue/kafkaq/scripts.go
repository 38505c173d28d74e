package kafkaq

import (
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// This file holds the Go twins of the scripts the Kafka backend runs itself
// (the job-state scripts' twins are in package jobstate): each builds its
// lua.Call from typed arguments and parses its reply, checking its type; a
// reply of the wrong shape is an error wrapping lua.ErrReply that names the
// script.

// backlogDecrCall is lua/backlog_decr.lua: lower tenant's backlog counter
// (keys.Backlog) by cost, never below 0, unless job id was purged, and
// refresh its TTL.
func backlogDecrCall(tenant, id string, cost int64) lua.Call {
	return lua.Call{Script: lua.BacklogDecr, Keys: []string{keys.Backlog(tenant), keys.JobState(tenant, id)},
		Args: []any{cost, keys.BacklogTTL.Milliseconds()}}
}

// parseBacklogDecr checks backlog_decr.lua's reply: the counter after the
// decrement, >= 0.
func parseBacklogDecr(v any) (int64, error) {
	n, err := lua.BacklogDecr.Int(v, "counter")
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, lua.BacklogDecr.ReplyError("counter %d, want >= 0", n)
	}
	return n, nil
}

// jobCancelledCall is lua/job_cancelled.lua: read the cancel marker of
// tenant's job id (keys.JobState).
func jobCancelledCall(tenant, id string) lua.Call {
	return lua.Call{Script: lua.JobCancelled, Keys: []string{keys.JobState(tenant, id)}}
}

// parseJobCancelled checks job_cancelled.lua's reply: 1 when the job is
// cancelled, 0 when not.
func parseJobCancelled(v any) (bool, error) {
	n, err := lua.JobCancelled.Int(v, "reply")
	if err != nil {
		return false, err
	}
	if n != 0 && n != 1 {
		return false, lua.JobCancelled.ReplyError("%d, want 1 or 0", n)
	}
	return n == 1, nil
}
