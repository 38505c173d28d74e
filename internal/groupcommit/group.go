// Package groupcommit lets concurrent callers share round trips (group
// commit), as sluice does for admission decisions, Redis enqueues and
// delivery-start records: at most Slots flushes are in flight; a caller
// that finds a free slot is flushed at once from its own goroutine, with
// no timer and no hand-off; items that arrive while every slot is busy
// queue, and the next flush carries them together. Under load one round
// trip carries as many items as arrived during the previous one; alone, an
// item costs exactly one.
package groupcommit

import (
	"context"
	"sync"
	"time"
)

// Group is one group-commit queue of items of type T. Set its fields before
// the first Do and leave them; a Group must not be copied after first use.
type Group[T any] struct {
	// Slots is how many flushes may be in flight at once; < 1 means 1.
	Slots int
	// MaxBatch caps the queued items one shared flush carries; 0 means all.
	MaxBatch int
	// Timeout bounds a shared flush (its ctx); 0 means none, the client's
	// own timeouts then bound it.
	Timeout time.Duration
	// Flush sends items in one round trip and answers every one of them
	// (each item carries its own way to be answered, such as a channel).
	// It runs with the caller's ctx when it carries the caller's own item
	// alone, else with a ctx of its own (Timeout), since one caller's
	// cancellation must not abort the others' round trip.
	Flush func(ctx context.Context, items []T)

	mu       sync.Mutex
	pending  []T
	inflight int
}

// Do flushes item at once under ctx when a slot is free, and returns true
// once Flush has returned. Otherwise it queues item for the next shared
// flush and returns false at once: the caller then waits for Flush to
// answer item (or for ctx to end, leaving item to be answered unheard).
func (g *Group[T]) Do(ctx context.Context, item T) bool {
	g.mu.Lock()
	if g.inflight < max(1, g.Slots) {
		g.inflight++
		g.mu.Unlock()
		g.Flush(ctx, []T{item})
		g.release()
		return true
	}
	g.pending = append(g.pending, item)
	g.mu.Unlock()
	return false
}

// release gives up a slot, or hands it to a goroutine that flushes what
// queued up meanwhile.
func (g *Group[T]) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.inflight--
		return
	}
	go g.drain()
}

// drain flushes the queue, MaxBatch items at a time, until it is empty,
// then gives up its slot. No goroutine outlives the queued work.
func (g *Group[T]) drain() {
	for {
		g.mu.Lock()
		n := len(g.pending)
		if n == 0 {
			g.inflight--
			g.mu.Unlock()
			return
		}
		if g.MaxBatch > 0 {
			n = min(n, g.MaxBatch)
		}
		items := make([]T, n)
		copy(items, g.pending)
		rest := copy(g.pending, g.pending[n:])
		clear(g.pending[rest:])
		g.pending = g.pending[:rest]
		g.mu.Unlock()

		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if g.Timeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, g.Timeout)
		}
		g.Flush(ctx, items)
		cancel()
	}
}
