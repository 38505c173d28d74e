package lua

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/groupcommit"
)

// Batcher runs the items of concurrent callers in shared round trips (group
// commit, internal/groupcommit, as Group does) and, more than Group, merges
// the items that leave together and share a key (a tenant) into one script
// call: the call's tenant-wide writes are then made once for all of its
// items, where one call per item made them for each. The calls of different
// keys share the pipeline (Exec, with its NOSCRIPT rule). Each call stays
// atomic; a call that fails (a Redis error, or a reply Parse refuses)
// fails each of its items.
type Batcher[T, R any] struct {
	rdb   redis.UniversalClient
	group groupcommit.Group[*batchItem[T, R]]
	spec  BatchSpec[T, R]
}

// BatchSpec says how a Batcher merges items.
type BatchSpec[T, R any] struct {
	// Key is the call an item may join (items of one key share a call).
	Key func(T) string
	// ID, when set, is an item's identity within its key: a call carries
	// an id at most once, a second item with it goes in a later call (as it
	// would have gone after the first).
	ID func(T) string
	// Max is the most items of one call (>= 1).
	Max int
	// Call builds the call of items (1 to Max, all of one key, in order).
	Call func(items []T) Call
	// Parse reads the reply of the call of n items: one result per item.
	Parse func(reply any, n int) ([]R, error)
}

// batchItem is one item waiting for its call; res and err are written
// before done is closed.
type batchItem[T, R any] struct {
	item T
	res  R
	err  error
	done chan struct{}
}

// NewBatcher returns a Batcher on rdb with at most maxFlushes pipelines in
// flight, each shared one bounded by timeout.
func NewBatcher[T, R any](rdb redis.UniversalClient, maxFlushes int, timeout time.Duration, spec BatchSpec[T, R]) *Batcher[T, R] {
	b := &Batcher[T, R]{rdb: rdb, spec: spec}
	b.group = groupcommit.Group[*batchItem[T, R]]{MaxFlushes: maxFlushes, Timeout: timeout, Flush: b.run}
	return b
}

// Do runs item and returns its result, or the error: Redis's, ctx's (the
// call may still run then), or Parse's (wrapping ErrReply).
func (b *Batcher[T, R]) Do(ctx context.Context, item T) (R, error) {
	r := &batchItem[T, R]{item: item, done: make(chan struct{})}
	b.group.Do(ctx, r)
	if err := groupcommit.Wait(ctx, r.done); err != nil {
		var zero R
		return zero, err
	}
	return r.res, r.err
}

// run sends items as one call per chunk (Chunks) in one pipeline and
// answers each.
func (b *Batcher[T, R]) run(ctx context.Context, items []*batchItem[T, R]) {
	chunks := Chunks(items, func(r *batchItem[T, R]) T { return r.item }, b.spec.Key, b.spec.ID, b.spec.Max)
	calls := make([]Call, len(chunks))
	for i, ch := range chunks {
		its := make([]T, len(ch))
		for j, r := range ch {
			its[j] = r.item
		}
		calls[i] = b.spec.Call(its)
	}
	for i, cmd := range Exec(ctx, b.rdb, calls, nil) {
		v, err := cmd.Result()
		var res []R
		if err == nil {
			res, err = b.spec.Parse(v, len(chunks[i]))
		}
		for j, r := range chunks[i] {
			r.err = err
			if res != nil {
				r.res = res[j]
			}
			close(r.done)
		}
	}
}

// Chunks splits items into the items of one call each: by key, in the
// order each key first appears, at most max per call, and (id set) an id at
// most once per call within its key.
func Chunks[E, T any](items []E, item func(E) T, key, id func(T) string, max int) [][]E {
	if len(items) == 1 {
		return [][]E{items}
	}
	var chunks [][]E
	open := map[string]int{} // key → its chunk that takes more items
	ids := map[string]map[string]bool{}
	for _, e := range items {
		t := item(e)
		k := key(t)
		c, ok := open[k]
		if ok && len(chunks[c]) >= max {
			ok = false
		}
		var i string
		if id != nil {
			i = id(t)
			if ok && ids[k][i] {
				ok = false
			}
		}
		if !ok {
			c = len(chunks)
			chunks = append(chunks, nil)
			open[k] = c
			ids[k] = map[string]bool{}
		}
		chunks[c] = append(chunks[c], e)
		if id != nil {
			ids[k][i] = true
		}
	}
	return chunks
}
