package redisq

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/groupcommit"
	"github.com/sluicehq/sluice/lua"
)

// finishGroup runs concurrent Finishes in shared round trips (group
// commit, internal/groupcommit, as lua.Group does), and more: the finishes
// of one tenant that leave together are one ack.lua call, so the tenant's
// lease set, leased hash, backlog counter and job indexes take one command
// each for all of them, where each finish made its own. Different tenants'
// calls share the pipeline. Each call stays atomic; a failed call (a Redis
// error, an unexpected reply) fails each of its finishes, whose leases then
// expire and whose jobs come again (at least once).
type finishGroup struct {
	rdb   redis.UniversalClient
	group groupcommit.Group[*finishReq]
}

// finishReq is one Finish waiting for its call; held and err are written
// before done is closed.
type finishReq struct {
	args ackArgs
	held bool
	err  error
	done chan struct{}
}

func newFinishGroup(rdb redis.UniversalClient, maxFlushes int, timeout time.Duration) *finishGroup {
	g := &finishGroup{rdb: rdb}
	g.group = groupcommit.Group[*finishReq]{MaxFlushes: maxFlushes, Timeout: timeout, Flush: g.run}
	return g
}

// Do finishes the job of a and returns whether its lease was held, or the
// error: Redis's, ctx's (the finish may still run then), or an unexpected
// reply (wrapping lua.ErrReply).
func (g *finishGroup) Do(ctx context.Context, a ackArgs) (bool, error) {
	r := &finishReq{args: a, done: make(chan struct{})}
	g.group.Do(ctx, r)
	if err := groupcommit.Wait(ctx, r.done); err != nil {
		return false, err
	}
	return r.held, r.err
}

// run sends reqs as ack.lua calls (ackChunks) in one pipeline and answers
// each.
func (g *finishGroup) run(ctx context.Context, reqs []*finishReq) {
	chunks := ackChunks(reqs)
	calls := make([]lua.Call, len(chunks))
	for i, ch := range chunks {
		args := make([]ackArgs, len(ch))
		for j, r := range ch {
			args[j] = r.args
		}
		calls[i] = ackCall(args)
	}
	for i, cmd := range lua.Exec(ctx, g.rdb, calls, nil) {
		v, err := cmd.Result()
		var held []bool
		if err == nil {
			held, err = parseAck(v, len(chunks[i]))
		}
		for j, r := range chunks[i] {
			r.err = err
			if held != nil {
				r.held = held[j]
			}
			close(r.done)
		}
	}
}

// ackChunks splits reqs into the jobs of one ack.lua call each: by tenant,
// in the order each tenant first appears, at most maxAckJobs per call, and
// a job id at most once per call (a second finish of the same job, such as
// a reaped copy's, goes in a later call, as it would have gone after the
// first).
func ackChunks(reqs []*finishReq) [][]*finishReq {
	if len(reqs) == 1 {
		return [][]*finishReq{reqs}
	}
	var chunks [][]*finishReq
	open := map[string]int{} // tenant → its chunk that takes more jobs
	ids := map[string]map[string]bool{}
	for _, r := range reqs {
		t, id := r.args.Tenant, r.args.JobID
		k, ok := open[t]
		if ok && (len(chunks[k]) >= maxAckJobs || ids[t][id]) {
			ok = false
		}
		if !ok {
			k = len(chunks)
			chunks = append(chunks, nil)
			open[t] = k
			ids[t] = map[string]bool{}
		}
		chunks[k] = append(chunks[k], r)
		ids[t][id] = true
	}
	return chunks
}
