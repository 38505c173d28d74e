package redisq

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// probeBatch bounds the tenants of one pipeline, so a probe of 10,000
// tenants holds neither one huge request nor its reply in memory at once.
const probeBatch = 2000

// Probe reports which of tenants have a job to claim (LLEN of keys.Queue),
// a retry due within within (the head of keys.Delayed) or a lease past its
// deadline (the head of keys.Processing; those are also in expired, for
// Reap), with three plain reads per tenant
// and one TIME, pipelined: one round trip per probeBatch tenants (on a
// Cluster, go-redis splits each pipeline by node). It implements
// queue.Prober. A tenant whose reads failed is reported too, so its lane
// finds out (a failure of the whole pipeline is returned).
func (c *Consumer) Probe(ctx context.Context, tenants []string, within time.Duration) (ready, expired []string, err error) {
	for from := 0; from < len(tenants) && err == nil; from += probeBatch {
		ready, expired, err = c.probe(ctx, tenants[from:min(from+probeBatch, len(tenants))], within, ready, expired)
	}
	return ready, expired, err
}

// probeCmds is one tenant's reads in a probe pipeline.
type probeCmds struct {
	queued          *redis.IntCmd
	delayed, leased *redis.ZSliceCmd
}

// probe is Probe of one batch, appending to ready and expired.
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
