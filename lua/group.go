package lua

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Group runs the Calls of concurrent callers in shared pipelines (group
// commit, internal/groupcommit): a call that finds fewer than maxFlushes
// pipelines in flight goes at once, alone, from its caller's goroutine;
// calls arriving while maxFlushes are in flight leave together in the next
// pipeline (Exec, with its NOSCRIPT rule). Each script stays atomic on its
// own; sharing a pipeline only saves round trips. It is a Batcher whose
// calls are never merged (Max 1).
type Group struct {
	b *Batcher[Call, any]
}

// NewGroup returns a group on rdb with at most maxFlushes pipelines in flight,
// each shared one bounded by timeout.
func NewGroup(rdb redis.UniversalClient, maxFlushes int, timeout time.Duration) *Group {
	return &Group{b: NewBatcher(rdb, maxFlushes, timeout, BatchSpec[Call, any]{
		Max:  1,
		Call: func(cs []Call) Call { return cs[0] },
	})}
}

// Do runs c and returns its reply, or its error, or ctx's error when ctx
// ends first (c may still run then).
func (g *Group) Do(ctx context.Context, c Call) (any, error) {
	return g.b.Do(ctx, c)
}
