package kafkaq

import (
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/lua"
)

// This file holds the Go twins of the scripts the Kafka backend runs itself
// (the job-state scripts' twins are in package jobstate): each builds its
// lua.Call from typed arguments and parses its reply, checking its type; a
// reply of the wrong shape is an error wrapping lua.ErrReply that names the
// script.

// finishPipelines is how many pipelines of Finish calls may be in flight
// at once; the Finishes that arrive meanwhile leave together in the next,
// a tenant's in one kafka_finish.lua call (lua.Batcher). A shared pipeline is
// bounded by backlogTimeout.
const finishPipelines = 2

// newFinishGroup is the consumer's Batcher of Finish calls on rdb; nil
// without Redis.
func newFinishGroup(rdb redis.UniversalClient) *lua.Batcher[kafkaFinish, int64] {
	if rdb == nil {
		return nil
	}
	return lua.NewBatcher(rdb, finishPipelines, backlogTimeout, lua.BatchSpec[kafkaFinish, int64]{
		Key: func(f kafkaFinish) string { return f.Tenant },
		ID:  func(f kafkaFinish) string { return f.JobID },
		Max: maxFinishJobs,
		// kafka_finish.lua refuses costs summing past limits.MaxCost (its
		// Lua doubles): a call's jobs stay within it.
		Weight:    func(f kafkaFinish) int64 { return f.Cost },
		MaxWeight: limits.MaxCost,
		Call:      kafkaFinishCall,
		Parse:     parseKafkaFinish,
	})
}

// kafkaFinish is one job's finish: its record (jobstate.Settle: State ""
// for a duplicate, which records nothing; Refresh refreshes the counter's
// TTL and trims the done index) and its cost.
type kafkaFinish struct {
	jobstate.Settle
	Cost int64
	// Record is the record's identity ("<topic>/<partition>@<offset>"), the fin
	// mark of kafka_finish.lua; "" marks nothing.
	Record string
}

// maxFinishJobs bounds the jobs of one kafka_finish.lua call (the script
// refuses more than 1000): a tenant's finishes beyond it go in further
// calls of the same pipeline.
const maxFinishJobs = 256

// The finish's TTL arguments, boxed once (an int64 this large allocates
// each time it is stored in an interface).
var (
	jobStateTTLArg    any = keys.JobStateTTL.Milliseconds()
	deadTTLArg        any = keys.DeadTTL.Milliseconds()
	backlogTTLArg     any = keys.BacklogTTL.Milliseconds()
	backlogOwedTTLArg any = keys.BacklogOwedTTL.Milliseconds()
)

// kafkaFinishCall is lua/kafka_finish.lua for jobs, all of one tenant, each
// job id at most once (lua.Chunks): lower the tenant's backlog counter
// (keys.Backlog) by their costs, never below 0 (the rest owed:
// keys.BacklogOwed, paid by the post-ack write, jobstate.EnqueueCall),
// leaving out purged jobs, and record each (job_state_settle.lua's write).
// The counter's TTL is refreshed and the done index trimmed when any job's
// Refresh is set.
func kafkaFinishCall(jobs []kafkaFinish) lua.Call {
	t := jobs[0].Tenant
	ks := make([]string, 0, 6+len(jobs))
	ks = append(ks, keys.JobsDispatched(t), keys.Delivering(t), keys.JobIndex(t, "dead"), keys.DeadRecords(t),
		keys.Backlog(t), keys.BacklogOwed(t))
	refresh := false
	for _, f := range jobs {
		ks = append(ks, keys.JobState(t, f.JobID))
		refresh = refresh || f.Refresh
	}
	args := make([]any, 0, 7+8*len(jobs))
	args = append(args, jobStateTTLArg, deadTTLArg, keys.DeadMaxJobs, lua.Flag(refresh), backlogTTLArg, backlogOwedTTLArg, len(jobs))
	for _, f := range jobs {
		args = append(args, f.Member, f.State, f.LastError, f.Reason, f.DeadLetter, jobstate.UnixMS(f.DiedAt), f.Cost, f.Record)
	}
	return lua.Call{Script: lua.KafkaFinish, Keys: ks, Args: args}
}

// parseKafkaFinish checks kafka_finish.lua's reply to a call of n jobs:
// the backlog counter after the decrement, >= 0, which each job gets.
func parseKafkaFinish(v any, n int) ([]int64, error) {
	left, err := lua.KafkaFinish.Int(v, "counter")
	if err != nil {
		return nil, err
	}
	if left < 0 {
		return nil, lua.KafkaFinish.ReplyError("counter %d, want >= 0", left)
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = left
	}
	return out, nil
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
