package redisq

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// probeBatch bounds the tenants of one pipeline, so a probe of 10,000
// tenants holds neither one huge request nor its reply in memory at once.
const probeBatch = 2000

// probeFullEvery is how often Probe reads every tenant's queue whatever its
// backlog counter says.
const probeFullEvery = 5 * time.Second

// Probe reports which of tenants have a job to claim (LLEN of keys.Queue),
// a retry due within within (the head of keys.Delayed) or a lease past its
// deadline (the head of keys.Processing; those are also in expired, for
// Reap). A first pipeline reads every tenant's backlog counter
// (keys.Backlog: queued, leased and delayed units alike) with one GET; only
// the tenants with a backlog above 0 get the three reads, with one TIME, in
// a second. Each pipeline holds at most probeBatch tenants (on a Cluster,
// go-redis splits it by node). An idle tenant thus costs one GET per probe.
// The drain does not rest on the counter alone: the first call, and one
// call every probeFullEvery after it, gives every tenant the three reads,
// so jobs a drifted counter hides (or pushed without one) wait at most that
// long. It implements queue.Prober. A tenant whose reads failed is reported
// too, so its lane finds out (a failure of a whole pipeline is returned).
func (c *Consumer) Probe(ctx context.Context, tenants []string, within time.Duration) (ready, expired []string, err error) {
	now := time.Now().UnixMilli()
	last := c.probedAll.Load()
	full := now-last >= probeFullEvery.Milliseconds() && c.probedAll.CompareAndSwap(last, now)
	for from := 0; from < len(tenants) && err == nil; from += probeBatch {
		busy := tenants[from:min(from+probeBatch, len(tenants))]
		if !full {
			busy, err = c.withBacklog(ctx, busy)
		}
		if err == nil && len(busy) > 0 {
			ready, expired, err = c.probe(ctx, busy, within, ready, expired)
		}
	}
	return ready, expired, err
}

// withBacklog returns those of tenants whose backlog counter is above 0 or
// could not be read as a number.
func (c *Consumer) withBacklog(ctx context.Context, tenants []string) ([]string, error) {
	gets := make([]*redis.StringCmd, len(tenants))
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range tenants {
			gets[i] = p.Get(ctx, keys.Backlog(t))
		}
		return nil
	})
	var out []string
	failed := 0
	for i, t := range tenants {
		v, gerr := gets[i].Result()
		if gerr == redis.Nil {
			continue
		}
		if gerr != nil {
			failed++
		}
		if n, perr := strconv.ParseInt(v, 10, 64); gerr != nil || perr != nil || n > 0 {
			out = append(out, t)
		}
	}
	if len(tenants) > 0 && failed == len(tenants) {
		return nil, queue.Unavailable("redis probe", err)
	}
	return out, nil
}

// probeCmds is one tenant's reads in a probe pipeline.
type probeCmds struct {
	queued          *redis.IntCmd
	delayed, leased *redis.ZSliceCmd
}

// probe is Probe's second pipeline for one batch, appending to ready and
// expired.
func (c *Consumer) probe(ctx context.Context, tenants []string, within time.Duration, ready, expired []string) ([]string, []string, error) {
	cmds := make([]probeCmds, len(tenants))
	var now *redis.TimeCmd
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		for i, t := range tenants {
			cmds[i] = probeCmds{
				queued:  p.LLen(ctx, keys.Queue(t)),
				delayed: p.ZRangeWithScores(ctx, keys.Delayed(t), 0, 0),
				leased:  p.ZRangeWithScores(ctx, keys.Processing(t), 0, 0),
			}
		}
		return nil
	})
	if now.Err() != nil {
		return ready, expired, queue.Unavailable("redis probe", errors.Join(now.Err(), err))
	}
	nowMS := now.Val().UnixMilli()
	for i, t := range tenants {
		work, lapsed := cmds[i].ready(nowMS, nowMS+within.Milliseconds())
		if work {
			ready = append(ready, t)
		}
		if lapsed {
			expired = append(expired, t)
		}
	}
	return ready, expired, nil
}

// ready reports whether the reads show work for a lane (or failed: the
// lane's own calls then report the error), and whether the earliest lease
// is past its deadline.
func (r probeCmds) ready(nowMS, dueMS int64) (work, lapsed bool) {
	z, err := r.leased.Result()
	lapsed = err == nil && len(z) > 0 && int64(z[0].Score) < nowMS
	if n, err := r.queued.Result(); err != nil || n > 0 || lapsed {
		return true, lapsed
	}
	z, err = r.delayed.Result()
	return err != nil || len(z) > 0 && int64(z[0].Score) <= dueMS, lapsed
}
