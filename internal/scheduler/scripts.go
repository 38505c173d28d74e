package scheduler

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// This file holds the Go twins of the scripts the mover runs: each builds
// its lua.Call from typed arguments and parses its reply, checking its
// shape; a wrong one is an error wrapping lua.ErrReply naming the script.

// takeCall is lua/schedule_take.lua: lease up to max of tenant's due jobs
// for lease (max 0: read only).
func takeCall(tenant string, max int, lease time.Duration) lua.Call {
	return lua.Call{Script: lua.ScheduleTake,
		Keys: []string{keys.JobIndex(tenant, "scheduled"), keys.ScheduledJobs(tenant), keys.ScheduledMoving(tenant)},
		Args: []any{0, max, lease.Milliseconds(), keys.JobStateTTL.Milliseconds(), keys.JobState(tenant, "")}}
}

// taken is one job schedule_take.lua leased: its id and stored envelope.
type taken struct {
	ID       string
	Envelope string
}

// takeReply is schedule_take.lua's reply.
type takeReply struct {
	NowMS int64
	// NextMS is the earliest due time or lease deadline left, -1 when none.
	NextMS int64
	// Count is the tenant's scheduled jobs not yet moved.
	Count int64
	Jobs  []taken
}

// parseTake checks schedule_take.lua's reply {now_ms, next_ms, count, id1,
// envelope1, ...}.
func parseTake(v any) (takeReply, error) {
	s := lua.ScheduleTake
	arr, err := s.Array(v, 3, -1)
	if err != nil {
		return takeReply{}, err
	}
	if len(arr)%2 != 1 {
		return takeReply{}, s.ReplyError("%d elements, want 3 + 2 per job", len(arr))
	}
	var r takeReply
	for i, p := range []*int64{&r.NowMS, &r.NextMS, &r.Count} {
		if *p, err = s.Int(arr[i], []string{"now_ms", "next_ms", "count"}[i]); err != nil {
			return r, err
		}
	}
	for i := 3; i < len(arr); i += 2 {
		var j taken
		if j.ID, err = s.String(arr[i], fmt.Sprintf("id %d", i/2)); err != nil {
			return r, err
		}
		if j.Envelope, err = s.String(arr[i+1], fmt.Sprintf("envelope %d", i/2)); err != nil {
			return r, err
		}
		r.Jobs = append(r.Jobs, j)
	}
	return r, nil
}

// doneJob is one moved job's arguments of schedule_done.lua.
type doneJob struct {
	ID          string
	DueMS       int64
	HeartbeatMS int64
	// Dead is the job's dead letter (dlq.Encode) when it cannot go onto the
	// queue; "" when it is on the queue.
	Dead string
}

// doneCall is lua/schedule_done.lua: end the moves of tenant's jobs.
func doneCall(tenant string, jobs []doneJob) lua.Call {
	ks := make([]string, 0, 6+len(jobs))
	ks = append(ks, keys.ScheduledJobs(tenant), keys.ScheduledMoving(tenant), keys.JobIndex(tenant, "scheduled"),
		keys.JobIndex(tenant, "dead"), keys.DeadRecords(tenant), keys.JobsDispatched(tenant))
	args := make([]any, 0, 3+4*len(jobs))
	args = append(args, keys.JobStateTTL.Milliseconds(), keys.DeadTTL.Milliseconds(), keys.DeadMaxJobs)
	for _, j := range jobs {
		ks = append(ks, keys.JobState(tenant, j.ID))
		args = append(args, j.ID, j.DueMS, j.HeartbeatMS, j.Dead)
	}
	return lua.Call{Script: lua.ScheduleDone, Keys: ks, Args: args}
}

// parseDone checks schedule_done.lua's reply {moved, next_ms}.
func parseDone(v any) (moved, nextMS int64, err error) {
	n, err := lua.ScheduleDone.Ints(v, 2)
	if err != nil {
		return 0, 0, err
	}
	if n[0] < 0 {
		return 0, 0, lua.ScheduleDone.ReplyError("moved %d, want >= 0", n[0])
	}
	return n[0], n[1], nil
}

// dueCall is lua/schedule_due.lua: up to max tenants whose hint is due,
// after the first skip of them.
func dueCall(max, skip int) lua.Call {
	return lua.Call{Script: lua.ScheduleDue, Keys: []string{keys.ScheduledTenants()}, Args: []any{max, skip}}
}

// parseDue checks schedule_due.lua's reply: tenant ids.
func parseDue(v any) ([]string, error) { return lua.ScheduleDue.Strings(v) }
