package kafkaq

import (
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// This file holds the Go twins of the scripts the Kafka backend runs itself
// (the job-state scripts' twins are in package jobstate): each builds its
// lua.Call from typed arguments and parses its reply, checking its type; a
// reply of the wrong shape is an error wrapping lua.ErrReply that names the
// script.

// finishPipelines is how many pipelines of Finish calls may be in flight
// at once; the Finishes that arrive meanwhile leave together in the next
// (lua.Group), each still its own kafka_finish.lua. A shared pipeline is
// bounded by backlogTimeout.
const finishPipelines = 2

// newFinishGroup is the consumer's group of Finish calls on rdb; nil
// without Redis.
func newFinishGroup(rdb redis.UniversalClient) *lua.Group {
	if rdb == nil {
		return nil
	}
	return lua.NewGroup(rdb, finishPipelines, backlogTimeout)
}

// kafkaFinishCall is lua/kafka_finish.lua: lower s.Tenant's backlog counter
// (keys.Backlog) by cost, never below 0 (the rest owed: keys.BacklogOwed,
// paid by the post-ack write, jobstate.EnqueueCall), unless the job was
// purged, then record s (job_state_settle.lua's write; nothing when
// s.State is "", a duplicate). s.Refresh refreshes the counter's TTL and
// trims the done index.
func kafkaFinishCall(s jobstate.Settle, cost int64) lua.Call {
	c := s.Call()
	c.Script = lua.KafkaFinish
	c.Keys = append(c.Keys, keys.Backlog(s.Tenant), keys.BacklogOwed(s.Tenant))
	c.Args = append(c.Args, cost, keys.BacklogTTL.Milliseconds(), keys.BacklogOwedTTL.Milliseconds())
	return c
}

// parseKafkaFinish checks kafka_finish.lua's reply: the backlog counter
// after the decrement, >= 0.
func parseKafkaFinish(v any) (int64, error) {
	n, err := lua.KafkaFinish.Int(v, "counter")
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, lua.KafkaFinish.ReplyError("counter %d, want >= 0", n)
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
