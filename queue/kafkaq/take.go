package kafkaq

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// TakeMax is the most jobs one Take hands out (kafka_take.lua's bound).
const TakeMax = 64

// Take takes up to k of tenant's jobs as Claim takes one (deferred retries
// that are due first, then the heads of its FIFOs round robin; with none
// it waits up to ClaimWait and returns nil with a zero wait) and, in one
// Redis call for all of them (lua/kafka_take.lua), reads what Claim reads
// (the cancel marker, the last beat, a done copy) and records the delivery
// start of each plain job (queue.Claimed.Started: its attempt number) as
// jobstate.Dispatch does: state in_flight, the in_flight index, the
// dispatched sequence, the deliveries in progress until now + Lease. A
// plain job is one that decoded, has no deadline and no heartbeat, is not a
// second copy held now (holdLocked), and that the script finds neither
// cancelled nor done with the same enqueued_at. The others come as Claim
// hands them out. When Redis fails, or answers something else, every job
// is handed out unstarted and not cancelled (counted in
// sluice_redis_errors_total{op="take"}), so the drainer records the start
// itself. k is clamped to [1, TakeMax]. It implements queue.Taker.
func (c *Consumer) Take(ctx context.Context, tenant string, k int) ([]*queue.Claimed, time.Duration, error) {
	es := c.pop(ctx, tenant, min(max(k, 1), TakeMax))
	if len(es) == 0 {
		return nil, 0, nil
	}
	jobs := make([]*queue.Claimed, len(es))
	for i, e := range es {
		jobs[i] = c.decodeEntry(e, tenant)
	}
	c.mu.Lock()
	for i, e := range es {
		c.claimed[jobs[i]] = e
		c.holdLocked(jobs[i], e)
	}
	c.mu.Unlock()
	c.startTaken(ctx, tenant, jobs)
	return jobs, 0, nil
}

// startTaken runs kafka_take.lua for jobs (all registered, none handed out
// yet) and sets each one's Started, Cancelled, Duplicate and, for a
// heartbeat job, BeatAt and Now from its reply. Poison jobs are left out of
// the call.
func (c *Consumer) startTaken(ctx context.Context, tenant string, jobs []*queue.Claimed) {
	if c.rdb == nil {
		return
	}
	read := make([]*queue.Claimed, 0, len(jobs))
	for _, j := range jobs {
		if j.DecodeErr == nil {
			read = append(read, j)
		}
	}
	if len(read) == 0 {
		return
	}
	start := make([]bool, len(read))
	for i, j := range read {
		start[i] = startable(j)
	}
	v, err := kafkaTakeCall(tenant, c.cfg.Lease, read, start).Run(ctx, c.rdb).Result()
	var r takeReply
	if err == nil {
		r, err = parseKafkaTake(v, len(read))
	}
	if err != nil {
		if ctx.Err() == nil {
			c.m.redisErrs.WithLabelValues("take").Inc()
		}
		return
	}
	for i, j := range read {
		f := r.Jobs[i]
		j.Cancelled = f.Cancelled
		if start[i] {
			j.Started = int(f.Attempt)
		}
		j.Duplicate = j.Duplicate || queue.SameJob(j.Envelope, f.DoneMS)
		if j.Envelope.HeartbeatMS > 0 {
			j.BeatAt, j.Now = msTime(f.BeatMS), msTime(r.NowMS)
		}
	}
}

// startable reports whether kafka_take.lua may start job's delivery: it
// needs no check of the drainer's first (no deadline, no heartbeat) and is
// not a second copy held now.
func startable(job *queue.Claimed) bool {
	env := job.Envelope
	return job.DecodeErr == nil && !job.Duplicate && env.Deadline == nil && env.HeartbeatMS <= 0
}

// kafkaTakeCall is lua/kafka_take.lua for jobs of tenant: read each one's
// cancel marker, beat and done copy, and start job i when start[i] (unless
// the script finds it cancelled or done) with its delivery lasting lease.
// Every key is declared.
func kafkaTakeCall(tenant string, lease time.Duration, jobs []*queue.Claimed, start []bool) lua.Call {
	ks := make([]string, 0, 2+len(jobs))
	ks = append(ks, keys.JobsDispatched(tenant), keys.Delivering(tenant))
	args := make([]any, 0, 4+4*len(jobs))
	args = append(args, 0, lease.Milliseconds(), keys.JobStateTTL.Milliseconds(), keys.QueueTTL.Milliseconds())
	for i, j := range jobs {
		env := j.Envelope
		ks = append(ks, keys.JobState(tenant, env.ID))
		flag := "0"
		if start[i] {
			flag = "1"
		}
		var enq int64
		if !env.EnqueuedAt.IsZero() {
			enq = env.EnqueuedAt.UnixMilli()
		}
		args = append(args, j.Token(), flag, env.Attempt+1, enq)
	}
	return lua.Call{Script: lua.KafkaTake, Keys: ks, Args: args}
}

// takeReply is kafka_take.lua's reply: Redis TIME (unix ms) and one
// takeJob per job of the call.
type takeReply struct {
	NowMS int64
	Jobs  []takeJob
}

// takeJob is one job of kafka_take.lua's reply: job_cancelled.lua's fields
// and the attempt number of a start recorded by the take (0: not started).
type takeJob struct {
	Cancelled               bool
	BeatMS, DoneMS, Attempt int64
}

// takeFields is how many reply elements kafka_take.lua gives per job.
const takeFields = 4

// parseKafkaTake checks kafka_take.lua's reply {now_ms, n × {cancelled
// (0|1), beat_ms, done_ms, attempt}} for a call of n jobs: now_ms > 0,
// attempt >= 0, and a cancelled job not started.
func parseKafkaTake(v any, n int) (takeReply, error) {
	s := lua.KafkaTake
	f, err := s.Ints(v, 1+takeFields*n)
	if err != nil {
		return takeReply{}, err
	}
	if f[0] <= 0 {
		return takeReply{}, s.ReplyError("now %d, want > 0", f[0])
	}
	r := takeReply{NowMS: f[0], Jobs: make([]takeJob, n)}
	for i := range r.Jobs {
		j := f[1+takeFields*i : 1+takeFields*(i+1)]
		switch {
		case j[0] != 0 && j[0] != 1:
			return takeReply{}, s.ReplyError("job %d: cancelled is %d, want 1 or 0", i, j[0])
		case j[3] < 0 || j[3] > 1<<31-1:
			return takeReply{}, s.ReplyError("job %d: attempt is %d, want >= 0", i, j[3])
		case j[0] == 1 && j[3] != 0:
			return takeReply{}, s.ReplyError("job %d: cancelled and started as attempt %d", i, j[3])
		}
		r.Jobs[i] = takeJob{Cancelled: j[0] == 1, BeatMS: j[1], DoneMS: j[2], Attempt: j[3]}
	}
	return r, nil
}
