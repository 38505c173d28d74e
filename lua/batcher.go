package lua

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/groupcommit"
)

// Batcher runs the items of concurrent callers in shared round trips (group
// commit, internal/groupcommit) and merges the items that leave together
// and share a key (a tenant) into one script call (Group is a Batcher that
// merges nothing): the call's tenant-wide writes are then made once for all of its
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
	// Max is the most items of one call (>= 1). With Max 1 every item is a
	// call of its own and Key may be nil (Group).
	Max int
	// Weight, when set, is an item's part of a sum its call makes (a job's
	// cost); a call's items weigh at most MaxWeight together, an item that
	// would take its call over goes in a later call. An item heavier than
	// MaxWeight on its own goes alone (its call refuses it).
	Weight    func(T) int64
	MaxWeight int64
	// Call builds the call of items (1 to Max, all of one key, in order).
	Call func(items []T) Call
	// Parse reads the reply of the call of n items: one result per item.
	// Nil hands each item the reply itself (R is then any: Group).
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
	chunks := chunk(items, func(r *batchItem[T, R]) T { return r.item }, b.spec)
	calls := make([]Call, len(chunks))
	its := make([]T, 0, min(len(items), b.spec.Max))
	for i, ch := range chunks {
		its = its[:0]
		for _, r := range ch {
			its = append(its, r.item)
		}
		calls[i] = b.spec.Call(its)
	}
	for i, cmd := range Exec(ctx, b.rdb, calls, nil) {
		v, err := cmd.Result()
		var res []R
		if err == nil && b.spec.Parse != nil {
			res, err = b.spec.Parse(v, len(chunks[i]))
		}
		for j, r := range chunks[i] {
			r.err = err
			switch {
			case res != nil:
				r.res = res[j]
			case b.spec.Parse == nil:
				r.res, _ = v.(R)
			}
			close(r.done)
		}
	}
}

// chunk splits items into the items of one call each: by key, in the order
// each key first appears, at most spec.Max per call, (spec.ID set) an id at
// most once per call within its key, and (spec.Weight set) at most
// spec.MaxWeight of weight per call, summed without overflow.
func chunk[E, T, R any](items []E, item func(E) T, spec BatchSpec[T, R]) [][]E {
	if len(items) == 1 || spec.Max <= 1 {
		out := make([][]E, len(items))
		for i := range items {
			out[i] = items[i : i+1 : i+1]
		}
		return out
	}
	type open struct {
		at     int // the key's chunk that takes more items
		weight int64
		ids    map[string]bool
	}
	var chunks [][]E
	opens := map[string]*open{}
	for _, e := range items {
		t := item(e)
		k := spec.Key(t)
		var w int64
		if spec.Weight != nil {
			w = spec.Weight(t)
		}
		var id string
		if spec.ID != nil {
			id = spec.ID(t)
		}
		o := opens[k]
		if o == nil || len(chunks[o.at]) >= spec.Max || (spec.ID != nil && o.ids[id]) ||
			w < 0 || w > spec.MaxWeight-o.weight {
			o = &open{at: len(chunks)}
			if spec.ID != nil {
				o.ids = map[string]bool{}
			}
			chunks = append(chunks, nil)
			opens[k] = o
		}
		chunks[o.at] = append(chunks[o.at], e)
		o.weight += w
		if spec.ID != nil {
			o.ids[id] = true
		}
		if w < 0 || w > spec.MaxWeight {
			delete(opens, k) // a weight no call takes goes alone
		}
	}
	return chunks
}
