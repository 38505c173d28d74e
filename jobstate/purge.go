package jobstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// PurgeChunk is the most jobs one purge script call handles, so a purge of
// any size is a series of short scripts, never one that blocks Redis.
const PurgeChunk = 1000

// Reason of a job cancelled by Purge.
const ReasonPurged = "purged"

// Purge cancels every waiting job of tenant (state cancelled, reason
// purged) and takes their cost off its backlog counter (to 0 when no job is
// in flight or arriving meanwhile), in calls of lua/purge.lua of at
// most PurgeChunk jobs each, and returns how many jobs it cancelled. The
// jobs purged are those queued before it starts (seq up to the tenant's
// enqueue sequence then) and every retry waiting for its time; jobs queued
// meanwhile stay. In order:
//
//  1. the queue list and the delayed set (keys.Queue, keys.Delayed; the Redis
//     backend's, empty on Kafka): the jobs leave them, so no drainer gets
//     them;
//  2. the queued and retrying indexes (keys.JobIndex; both backends): the
//     jobs still waiting there (on Kafka, every one: its records stay in the
//     topic) are marked, so the drainers' cancel check drops them unsent,
//     without an outflow slot, when they come up;
//
// Each call takes its purged jobs' cost off the backlog counter
// (keys.Backlog) in the same script, so jobs in flight and jobs queued
// meanwhile stay counted; a purged job dropped later does not lower it again
// (lua/ack.lua, lua/backlog_decr.lua).
//
// Jobs in flight finish as they would; scheduled jobs (not yet due) are not
// purged. A Redis error stops the purge where it is and is returned with
// the count so far (the jobs purged stay purged; run it again).
func Purge(ctx context.Context, rdb redis.UniversalClient, tenant string) (int64, error) {
	top := "+inf"
	switch seq, err := rdb.Get(ctx, keys.JobSeq(tenant)).Int64(); {
	case err == nil:
		top = strconv.FormatInt(seq, 10)
	case !errors.Is(err, redis.Nil):
		return 0, fmt.Errorf("jobstate: purge %s: %w", tenant, err)
	}
	var total int64
	for _, src := range []struct{ kind, key, top string }{
		{"queue", keys.Queue(tenant), top},
		{"delayed", keys.Delayed(tenant), "+inf"},
		{"index", keys.JobIndex(tenant, Queued), top},
		{"index", keys.JobIndex(tenant, Retrying), "+inf"},
	} {
		for {
			v, err := purgeCall(tenant, src.kind, src.key, src.top).Run(ctx, rdb).Result()
			if err == nil {
				var n, read int64
				if n, read, err = purgeReply(v); err == nil {
					total += n
					if read < PurgeChunk {
						break
					}
					continue
				}
			}
			return total, fmt.Errorf("jobstate: purge %s (%s): %w", tenant, src.kind, err)
		}
	}
	return total, nil
}

// purgeCall is the call of purge.lua on one source of tenant's jobs.
func purgeCall(tenant, kind, key, top string) lua.Call {
	return lua.Call{Script: lua.Purge, Keys: []string{key, keys.JobsDispatched(tenant), keys.Backlog(tenant)},
		Args: []any{kind, top, PurgeChunk, keys.JobState(tenant, ""), keys.JobStateTTL.Milliseconds(), keys.BacklogTTL.Milliseconds()}}
}

// purgeReply reads purge.lua's reply {purged, read}, both >= 0.
func purgeReply(v any) (purged, read int64, err error) {
	s := lua.Purge
	n, err := s.Ints(v, 2)
	if err != nil {
		return 0, 0, err
	}
	if n[0] < 0 || n[1] < 0 || n[0] > n[1] {
		return 0, 0, s.ReplyError("%v, want {purged, read} with 0 <= purged <= read", n)
	}
	return n[0], n[1], nil
}
