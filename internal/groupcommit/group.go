// Package groupcommit lets concurrent callers share round trips (group
// commit), as sluice does for admission decisions, Redis enqueues and
// delivery-start records: at most MaxFlushes flushes are in flight; a caller
// that finds fewer in flight is flushed at once from its own goroutine, with
// no timer and no hand-off; items that arrive while MaxFlushes are in flight
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
	// MaxFlushes is how many flushes may be in flight at once; < 1 means 1.
	MaxFlushes int
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

// Do flushes item at once when fewer than MaxFlushes are in flight: from the caller's
// goroutine, together with any items that queued while it started,
// and under ctx when item goes alone. Otherwise it queues item for the next
// shared flush and returns at once. Either way the caller then waits for
// Flush to answer item (Wait), which, when item left inline, it has already
// done (or another flush took item along and answers it).
func (g *Group[T]) Do(ctx context.Context, item T) {
	g.mu.Lock()
	if g.inflight >= max(1, g.MaxFlushes) {
		g.pending = append(g.pending, item)
		g.mu.Unlock()
		return
	}
	g.inflight++
	g.pending = append(g.pending, item)
	g.mu.Unlock()
	switch items := g.take(); len(items) {
	case 0: // a running flush took item along
	case 1:
		g.Flush(ctx, items)
	default:
		g.flush(items)
	}
	g.release()
}

// Wait waits until done yields (an item's answer) or ctx ends, and returns
// ctx's error in the second case. An answer already there wins over an
// ended ctx.
func Wait(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release ends a flush, or hands its place to a goroutine that flushes what
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
// then ends. No goroutine outlives the queued work.
func (g *Group[T]) drain() {
	for {
		items := g.take()
		if items == nil {
			g.mu.Lock()
			if len(g.pending) == 0 {
				g.inflight--
				g.mu.Unlock()
				return
			}
			g.mu.Unlock()
			continue
		}
		g.flush(items)
	}
}

// take removes up to MaxBatch items from the queue, nil when it is empty.
func (g *Group[T]) take() []T {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.pending)
	if n == 0 {
		return nil
	}
	if g.MaxBatch > 0 {
		n = min(n, g.MaxBatch)
	}
	items := make([]T, n)
	copy(items, g.pending)
	rest := copy(g.pending, g.pending[n:])
	clear(g.pending[rest:])
	g.pending = g.pending[:rest]
	return items
}

// flush runs Flush on shared items under a ctx of their own.
func (g *Group[T]) flush(items []T) {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if g.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, g.Timeout)
	}
	defer cancel()
	g.Flush(ctx, items)
}
