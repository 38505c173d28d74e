package lua

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/groupcommit"
)

// Group runs the Calls of concurrent callers in shared pipelines (group
// commit, internal/groupcommit): a call that finds fewer than maxFlushes
// pipelines in flight goes at once, alone, from its caller's goroutine;
// calls arriving while maxFlushes are in flight leave together in the next
// pipeline (Exec, with its NOSCRIPT rule). Each script stays atomic on its
// own; sharing a pipeline only saves round trips.
type Group struct {
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

// NewGroup returns a group on rdb with at most maxFlushes pipelines in flight,
// each shared one bounded by timeout.
func NewGroup(rdb redis.UniversalClient, maxFlushes int, timeout time.Duration) *Group {
	g := &Group{rdb: rdb}
	g.group = groupcommit.Group[*groupCall]{MaxFlushes: maxFlushes, Timeout: timeout, Flush: g.run}
	return g
}

// Do runs c and returns its reply, or its error, or ctx's error when ctx
// ends first (c may still run then).
func (g *Group) Do(ctx context.Context, c Call) (any, error) {
	r := &groupCall{call: c, done: make(chan struct{})}
	g.group.Do(ctx, r)
	if err := groupcommit.Wait(ctx, r.done); err != nil {
		return nil, err
	}
	return r.val, r.err
}

// run sends calls in one round trip and answers each.
func (g *Group) run(ctx context.Context, calls []*groupCall) {
	cs := make([]Call, len(calls))
	for i, r := range calls {
		cs[i] = r.call
	}
	for i, cmd := range Exec(ctx, g.rdb, cs, nil) {
		calls[i].val, calls[i].err = cmd.Result()
		close(calls[i].done)
	}
}
