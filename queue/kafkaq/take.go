package kafkaq

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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
	jobs := c.popTaken(ctx, tenant, min(max(k, 1), TakeMax))
	if len(jobs) == 0 {
		return nil, 0, nil
	}
	_, _, _ = c.startTaken(ctx, tenant, jobs, turnGate{}) // ungated: never an error, every job covered
	return jobs, 0, nil
}

// popTaken pops up to k of tenant's jobs (pop: it waits as Claim does when
// there are none), decodes them and registers them as claimed (holdLocked
// marks a second copy held now), reading nothing from Redis.
func (c *Consumer) popTaken(ctx context.Context, tenant string, k int) []*queue.Claimed {
	es := c.pop(ctx, tenant, k)
	if len(es) == 0 {
		return nil
	}
	jobs := make([]*queue.Claimed, len(es))
	for i, e := range es {
		jobs[i] = c.decodeEntry(e, tenant)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range es {
		c.claimed[jobs[i]] = e
		c.holdLocked(jobs[i], e)
	}
	return jobs
}

// startTaken runs kafka_take.lua for jobs (all registered, none handed out
// yet), through the bucket when g has a rate (then jobs is one job, or
// several that are all startable and of one cost: gatedBatch), and sets
// each one's Started (and SendDelay: a turn granted ahead), Cancelled,
// Duplicate and, for a heartbeat job, BeatAt and Now from its reply; it
// returns the bucket's answer and how many of jobs, from the first, the
// call covered (len(jobs) but for a gated call whose bucket refused a
// later job's turn: the rest are to be put back). Poison jobs are left out
// of the call. When Redis fails, or answers something else, the jobs stay
// unstarted and not cancelled (counted in
// sluice_redis_errors_total{op="take"}), the answer is zero and all are
// covered; the error returned is only the script's refusal of g's numbers
// or of the tenant's override (a gated call's "kafka_take: ... is out of
// range").
func (c *Consumer) startTaken(ctx context.Context, tenant string, jobs []*queue.Claimed, g turnGate) (queue.Turn, int, error) {
	if c.rdb == nil {
		return queue.Turn{}, len(jobs), nil
	}
	read := make([]*queue.Claimed, 0, len(jobs))
	for _, j := range jobs {
		if j.DecodeErr == nil {
			read = append(read, j)
		}
	}
	if len(read) == 0 {
		return queue.Turn{}, len(jobs), nil
	}
	start := make([]bool, len(read))
	for i, j := range read {
		start[i] = startable(j)
	}
	v, err := kafkaTakeCall(tenant, c.cfg.Lease, read, start, g).Run(ctx, c.rdb).Result()
	if err != nil && g.Rate > 0 && refused(err) {
		return queue.Turn{}, 0, err
	}
	var r takeReply
	if err == nil {
		r, err = parseKafkaTake(v, len(read))
	}
	if err != nil {
		if ctx.Err() == nil {
			c.m.redisErrs.WithLabelValues("take").Inc()
		}
		return queue.Turn{}, len(jobs), nil
	}
	covered := len(jobs)
	if int(r.Taken) < len(read) {
		// Only a gated call of several stops early, and all of its jobs
		// decoded (read is jobs).
		covered = int(r.Taken)
	}
	for i, j := range read[:r.Taken] {
		f := r.Jobs[i]
		j.Cancelled = f.Cancelled
		if start[i] {
			j.Started = int(f.Attempt)
			j.SendDelay = time.Duration(f.DelayUS) * time.Microsecond
		}
		j.Duplicate = j.Duplicate || queue.SameJob(j.Envelope, f.DoneMS)
		if j.Envelope.HeartbeatMS > 0 {
			j.BeatAt, j.Now = msTime(f.BeatMS), msTime(r.NowMS)
		}
	}
	return r.turn(), covered, nil
}

// refused reports whether err is kafka_take.lua's own refusal of a number
// (an error reply naming the script), not a failure of Redis.
func refused(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.Contains(re.Error(), "kafka_take: ") && strings.HasSuffix(re.Error(), " is out of range")
}

// startable reports whether kafka_take.lua may start job's delivery: it
// needs no check of the drainer's first (no deadline, no heartbeat) and is
// not a second copy held now.
func startable(job *queue.Claimed) bool {
	env := job.Envelope
	return job.DecodeErr == nil && !job.Duplicate && env.Deadline == nil && env.HeartbeatMS <= 0
}

// turnGate is a TakeTurn's bucket for kafka_take.lua: rate units/s and
// capacity units (Rate 0: no bucket, Take's call), and how far ahead a turn
// may be granted (the cost is the first job's: a gated call's jobs share it).
type turnGate struct {
	Rate, Capacity float64
	Ahead          time.Duration
}

// kafkaTakeCall is lua/kafka_take.lua for jobs of tenant: read each one's
// cancel marker, beat and done copy, and start job i when start[i] (unless
// the script finds it cancelled, done, or under way from a copy in another
// partition: job.Source) with its delivery lasting lease;
// with g's rate (then jobs is one job, or startable jobs of one cost) only
// when the bucket gives it its turn for its envelope's cost. Every key is
// declared.
func kafkaTakeCall(tenant string, lease time.Duration, jobs []*queue.Claimed, start []bool, g turnGate) lua.Call {
	ks := make([]string, 0, 4+len(jobs))
	ks = append(ks, keys.JobsDispatched(tenant), keys.Delivering(tenant))
	args := make([]any, 0, 9+5*len(jobs))
	args = append(args, 0, lease.Milliseconds(), keys.JobStateTTL.Milliseconds(), keys.QueueTTL.Milliseconds())
	if g.Rate > 0 {
		ks = append(ks, keys.Water(tenant), keys.Override(tenant))
		args = append(args, strconv.FormatFloat(g.Rate, 'f', -1, 64), strconv.FormatFloat(g.Capacity, 'f', -1, 64),
			keys.WaterMargin.Milliseconds(), g.Ahead.Microseconds(), jobs[0].Envelope.Cost)
	} else {
		args = append(args, 0, 0, 0, 0, 0)
	}
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
		args = append(args, j.Token(), flag, env.Attempt+1, enq, j.Source)
	}
	return lua.Call{Script: lua.KafkaTake, Keys: ks, Args: args}
}

// takeReply is kafka_take.lua's reply: Redis TIME (unix ms), the bucket's
// answer (all 0 when it was not read), how many jobs the call read from
// the first, and one takeJob per job of the call.
type takeReply struct {
	NowMS, NowUS                         int64
	WaitUS, Taken, WaterMicro, RateMilli int64
	Jobs                                 []takeJob
}

// turn is r's bucket answer as a queue.Turn.
func (r takeReply) turn() queue.Turn {
	return queue.Turn{
		Wait:  time.Duration(r.WaitUS) * time.Microsecond,
		Water: float64(r.WaterMicro) / 1e6, Rate: float64(r.RateMilli) / 1e3,
		At: time.UnixMicro(r.NowUS),
	}
}

// takeJob is one job of kafka_take.lua's reply: job_cancelled.lua's fields,
// the attempt number of a start recorded by the take (0: not started) and
// the delay before the send of a turn granted ahead.
type takeJob struct {
	Cancelled                        bool
	BeatMS, DoneMS, Attempt, DelayUS int64
}

// takeHead and takeFields are how many reply elements kafka_take.lua gives
// before the jobs and per job.
const (
	takeHead   = 6
	takeFields = 5
)

// parseKafkaTake checks kafka_take.lua's reply {now_ms, wait_us, taken,
// water_micro, rate_milli, now_us, n × {cancelled (0|1), beat_ms, done_ms,
// attempt, delay_us}} for a call of n jobs: now_ms > 0 and now_us (the
// bucket's clock) not behind it, no negative wait, level or
// rate, taken in [0, n] (0 with a wait, n without a wait unless the call
// had several jobs), attempt >= 0, a cancelled job not started, a delay in
// [0, queue.TurnAheadMax] only for a started job, no job started with a
// wait, and the jobs past taken all 0.
func parseKafkaTake(v any, n int) (takeReply, error) {
	s := lua.KafkaTake
	f, err := s.Ints(v, takeHead+takeFields*n)
	if err != nil {
		return takeReply{}, err
	}
	r := takeReply{NowMS: f[0], WaitUS: f[1], Taken: f[2], WaterMicro: f[3], RateMilli: f[4], NowUS: f[5], Jobs: make([]takeJob, n)}
	switch {
	case r.NowMS <= 0 || r.NowUS/1000 < r.NowMS:
		return takeReply{}, s.ReplyError("now %d ms and bucket clock %d µs, want > 0 and the clock not behind now", r.NowMS, r.NowUS)
	case r.WaitUS < 0 || r.WaterMicro < 0 || r.RateMilli < 0:
		return takeReply{}, s.ReplyError("wait %d µs, water %d, rate %d: want none negative", r.WaitUS, r.WaterMicro, r.RateMilli)
	case r.Taken < 0 || r.Taken > int64(n) || (r.WaitUS > 0) != (r.Taken == 0):
		return takeReply{}, s.ReplyError("%d of %d jobs taken with a wait of %d µs", r.Taken, n, r.WaitUS)
	}
	for i := range r.Jobs {
		j := f[takeHead+takeFields*i : takeHead+takeFields*(i+1)]
		switch {
		case int64(i) >= r.Taken && (j[0] != 0 || j[1] != 0 || j[2] != 0 || j[3] != 0 || j[4] != 0):
			return takeReply{}, s.ReplyError("job %d past the %d taken has fields %v", i, r.Taken, j)
		case j[0] != 0 && j[0] != 1:
			return takeReply{}, s.ReplyError("job %d: cancelled is %d, want 1 or 0", i, j[0])
		case j[3] < 0 || j[3] > 1<<31-1:
			return takeReply{}, s.ReplyError("job %d: attempt is %d, want >= 0", i, j[3])
		case j[0] == 1 && j[3] != 0:
			return takeReply{}, s.ReplyError("job %d: cancelled and started as attempt %d", i, j[3])
		case j[4] < 0 || j[4] > queue.TurnAheadMax.Microseconds() || (j[4] > 0 && j[3] == 0):
			return takeReply{}, s.ReplyError("job %d: a delay of %d µs with attempt %d", i, j[4], j[3])
		}
		r.Jobs[i] = takeJob{Cancelled: j[0] == 1, BeatMS: j[1], DoneMS: j[2], Attempt: j[3], DelayUS: j[4]}
	}
	return r, nil
}
