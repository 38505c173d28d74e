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
// refresh its TTL when refresh (keys.Refresh's Due) or the call created or
// reset the counter.
func backlogDecrCall(tenant, id string, cost int64, refresh bool) lua.Call {
	f := "0"
	if refresh {
		f = "1"
	}
	return lua.Call{Script: lua.BacklogDecr, Keys: []string{keys.Backlog(tenant), keys.JobState(tenant, id)},
		Args: []any{cost, keys.BacklogTTL.Milliseconds(), f}}
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
// tenant's job id (keys.JobState) and, when beats, its last heartbeat and
// Redis TIME.
func jobCancelledCall(tenant, id string, beats bool) lua.Call {
	flag := "0"
	if beats {
		flag = "1"
	}
	return lua.Call{Script: lua.JobCancelled, Keys: []string{keys.JobState(tenant, id)}, Args: []any{flag}}
}

// cancelledReply is job_cancelled.lua's reply: BeatMS (the last heartbeat)
// and NowMS (Redis TIME) are unix ms, 0 when not read.
// DoneMS is the enqueued_at of a job recorded as done (0: not done).
type cancelledReply struct {
	Cancelled             bool
	BeatMS, NowMS, DoneMS int64
}

// parseJobCancelled checks job_cancelled.lua's reply {cancelled (1|0),
// beat_ms, now_ms, done_ms}.
func parseJobCancelled(v any) (cancelledReply, error) {
	s := lua.JobCancelled
	n, err := s.Ints(v, 4)
	if err != nil {
		return cancelledReply{}, err
	}
	if n[0] != 0 && n[0] != 1 {
		return cancelledReply{}, s.ReplyError("cancelled is %d, want 1 or 0", n[0])
	}
	return cancelledReply{Cancelled: n[0] == 1, BeatMS: n[1], NowMS: n[2], DoneMS: n[3]}, nil
}
