package redisq

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/multiget"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// probeBatch bounds the tenants of one pipeline, so a probe of 10,000
// tenants holds neither one huge request nor its reply in memory at once.
const probeBatch = 2000

// probeFullEvery is how often Probe reads every tenant's queue whatever its
// backlog counter says: the tenants are cut into probeSlices slices (by a
// hash of the name), and one slice is read in full every
// probeFullEvery / probeSlices, so the reads are spread over the period
// instead of falling on one probe.
const (
	probeFullEvery = 5 * time.Second
	probeSlices    = 5
)

// probeSweep chooses the slices a probe reads in full: every slice at the
// first probe, then every slice whose turn came since the last one (all of
// them after a gap of probeFullEvery or more).
type probeSweep struct {
	mu      sync.Mutex
	started bool
	next    int       // the slice whose turn comes next
	turn    time.Time // when that turn comes
}

// due returns the slices to read in full now, as a bit set.
func (s *probeSweep) due(now time.Time) (slices uint32) {
	const every = probeFullEvery / probeSlices
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || now.Sub(s.turn) >= probeFullEvery {
		s.started, s.turn = true, now.Add(every)
		return 1<<probeSlices - 1
	}
	for !now.Before(s.turn) {
		slices |= 1 << s.next
		s.next = (s.next + 1) % probeSlices
		s.turn = s.turn.Add(every)
	}
	return slices
}

// probeSlice is tenant's slice (FNV-1a of its name).
func probeSlice(tenant string) int {
	h := uint32(2166136261)
	for i := 0; i < len(tenant); i++ {
		h = (h ^ uint32(tenant[i])) * 16777619
	}
	return int(h % probeSlices)
}

// Probe reports which of tenants have a job to claim (LLEN of keys.Queue),
// a retry due within within (the head of keys.Delayed) or a lease past its
// deadline (the head of keys.Processing; those are also in expired, for
// Reap). First every tenant's backlog counter (keys.Backlog: queued, leased
// and delayed units alike) is read, with one MGET per probeBatch tenants on
// a single Redis (one GET each in a pipeline on a Cluster, where the keys
// lie in different slots); only the tenants with a backlog above 0 get the
// three reads, with one TIME, in a second pipeline. Each pipeline holds at
// most probeBatch tenants (on a Cluster, go-redis splits it by node). An
// idle tenant thus costs a key in an MGET per probe.
// The drain does not rest on the counter alone: the first call reads every
// tenant in full, and after it each tenant is read in full at least once
// every probeFullEvery (its slice's turn, probeSweep), so jobs a drifted
// counter hides (or pushed without one) wait about that long at most. A
// read in full starts with one EXISTS of the tenant's three keys, and only
// a tenant holding one of them gets the three reads. It
// implements queue.Prober. A tenant whose reads failed is reported too, so
// its lane finds out (a failure of a whole pipeline is returned).
func (c *Consumer) Probe(ctx context.Context, tenants []string, within time.Duration) (ready, expired []string, err error) {
	full := c.sweep.due(time.Now())
	all := c.backlog.of(tenants)
	var busy, counted, swept, ks []string
	for from := 0; from < len(tenants) && err == nil; from += probeBatch {
		busy, counted, swept, ks = busy[:0], counted[:0], swept[:0], ks[:0]
		for i := from; i < min(from+probeBatch, len(tenants)); i++ {
			if t := tenants[i]; full&(1<<probeSlice(t)) != 0 {
				swept = append(swept, t)
			} else {
				counted, ks = append(counted, t), append(ks, all[i])
			}
		}
		if len(counted) > 0 {
			busy, err = c.withBacklog(ctx, counted, ks, busy)
		}
		if err == nil && len(swept) > 0 {
			busy, err = c.withKeys(ctx, swept, busy)
		}
		if err == nil && len(busy) > 0 {
			ready, expired, err = c.probe(ctx, busy, within, ready, expired)
		}
	}
	return ready, expired, err
}

// withBacklog appends to out those of tenants whose backlog counter (ks,
// in the same order) is above 0 or could not be read as a number.
func (c *Consumer) withBacklog(ctx context.Context, tenants, ks, out []string) ([]string, error) {
	vals, failed, err := multiget.Get(ctx, c.rdb, ks)
	if len(tenants) > 0 && failed == len(tenants) {
		return nil, queue.Unavailable("redis probe", err)
	}
	for i, t := range tenants {
		v, ok := vals[i].(string)
		if vals[i] == nil {
			continue // no counter: no backlog
		}
		if n, perr := strconv.ParseInt(v, 10, 64); !ok || perr != nil || n > 0 {
			out = append(out, t)
		}
	}
	return out, nil
}

// withKeys appends to out those of tenants that hold a queue, a delayed set
// or a lease set (one EXISTS of the three, in one slot, per tenant), or
// whose EXISTS failed: a tenant without any is idle whatever its counter
// says, at one command instead of three.
func (c *Consumer) withKeys(ctx context.Context, tenants, out []string) ([]string, error) {
	exists := make([]*redis.IntCmd, len(tenants))
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range tenants {
			exists[i] = p.Exists(ctx, keys.Queue(t), keys.Delayed(t), keys.Processing(t))
		}
		return nil
	})
	failed := 0
	for i, t := range tenants {
		n, xerr := exists[i].Result()
		if xerr != nil {
			failed++
		}
		if xerr != nil || n > 0 {
			out = append(out, t)
		}
	}
	if failed == len(tenants) {
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

// backlogKeys remembers the backlog counter keys (keys.Backlog) of the
// tenants Probe reads every second, so a probe of 10,000 idle tenants
// builds no key name: it reuses one slice of them while the tenant list is
// the same (the drainer passes the same tenants in the same order until
// its configuration changes), and builds them again when the list differs.
type backlogKeys struct {
	mu      sync.Mutex
	tenants []string // the list ks was built for (a copy)
	ks      []string
}

// of returns the backlog keys of tenants, in order. The slice is shared:
// the caller only reads it.
func (b *backlogKeys) of(tenants []string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Equal(b.tenants, tenants) {
		b.tenants, b.ks = slices.Clone(tenants), make([]string, len(tenants))
		for i, t := range tenants {
			b.ks[i] = keys.Backlog(t)
		}
	}
	return b.ks
}
