package jobstate

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/groupcommit"
)

// CallGroup runs the Calls of concurrent callers in shared pipelines (group
// commit, internal/groupcommit): a call that finds a free slot goes at once,
// alone, from its caller's goroutine; calls arriving while every slot is
// busy leave together in the next pipeline. Each script stays atomic on its
// own; sharing a pipeline only saves round trips. A call whose script the
// node lost is run again on its own, which reloads it.
type CallGroup struct {
	rdb   redis.UniversalClient
	group groupcommit.Group[*groupCall]
}

// groupCall is one Call waiting for its pipeline; val and err are written
// before done is closed.
type groupCall struct {
	call Call
	val  any
	err  error
	done chan struct{}
}

// NewCallGroup returns a group on rdb with at most slots pipelines in
// flight, each shared one bounded by timeout.
func NewCallGroup(rdb redis.UniversalClient, slots int, timeout time.Duration) *CallGroup {
	g := &CallGroup{rdb: rdb}
	g.group = groupcommit.Group[*groupCall]{Slots: slots, Timeout: timeout, Flush: g.run}
	return g
}

// Do runs c and returns its reply, or its error, or ctx's error when ctx
// ends first (c may still run then).
func (g *CallGroup) Do(ctx context.Context, c Call) (any, error) {
	r := &groupCall{call: c, done: make(chan struct{})}
	g.group.Do(ctx, r)
	if err := groupcommit.Wait(ctx, r.done); err != nil {
		return nil, err
	}
	return r.val, r.err
}

// run sends calls in one pipeline and answers each.
func (g *CallGroup) run(ctx context.Context, calls []*groupCall) {
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range calls {
			cmds[i] = r.call.Pipe(ctx, p)
		}
		return nil
	})
	for i, r := range calls {
		r.val, r.err = r.call.Retry(ctx, g.rdb, cmds[i]).Result()
		close(r.done)
	}
}
