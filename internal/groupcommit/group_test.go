package groupcommit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// item is a test item: its flush closes done.
type item struct {
	id   int
	done chan struct{}
}

// recorder is a Flush that records what it saw, slowly enough for items to
// queue up behind it.
type recorder struct {
	mu        sync.Mutex
	flushes   [][]int
	inflight  atomic.Int64
	peak      atomic.Int64
	ctxErrs   int
	deadlines int
	delay     time.Duration
}

func (r *recorder) flush(ctx context.Context, items []*item) {
	n := r.inflight.Add(1)
	for {
		p := r.peak.Load()
		if n <= p || r.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(r.delay)
	ids := make([]int, len(items))
	for i, it := range items {
		ids[i] = it.id
	}
	r.mu.Lock()
	r.flushes = append(r.flushes, ids)
	if ctx.Err() != nil {
		r.ctxErrs++
	}
	if _, ok := ctx.Deadline(); ok {
		r.deadlines++
	}
	r.mu.Unlock()
	r.inflight.Add(-1)
	for _, it := range items {
		close(it.done)
	}
}

// TestLoneItemFlushedInline: with nothing in flight, Do flushes the item
// from the caller's goroutine, alone, under the caller's ctx, before it
// returns.
func TestLoneItemFlushedInline(t *testing.T) {
	r := &recorder{}
	g := &Group[*item]{MaxFlushes: 2, Flush: r.flush}
	type key struct{}
	it := &item{id: 1, done: make(chan struct{})}
	g.Do(context.WithValue(context.Background(), key{}, 1), it)
	select {
	case <-it.done:
	default:
		t.Fatal("Do returned before the item was flushed")
	}
	if len(r.flushes) != 1 || len(r.flushes[0]) != 1 {
		t.Errorf("flushes = %v, want one of one item", r.flushes)
	}
}

// TestConcurrentItemsShareFlushes: many concurrent items are each flushed
// exactly once, never more than MaxFlushes flushes at a time, batches capped at
// MaxBatch, far fewer flushes than items, and shared flushes get their own
// ctx with the Timeout.
func TestConcurrentItemsShareFlushes(t *testing.T) {
	r := &recorder{delay: 2 * time.Millisecond}
	g := &Group[*item]{MaxFlushes: 2, MaxBatch: 16, Timeout: time.Minute, Flush: r.flush}
	const n = 400
	items := make([]*item, n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for i := range items {
		items[i] = &item{id: i, done: make(chan struct{})}
		wg.Go(func() {
			g.Do(ctx, items[i])
			if err := Wait(ctx, items[i].done); err != nil {
				t.Errorf("item %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	cancel()
	seen := make([]int, n)
	shared := 0
	for _, f := range r.flushes {
		if len(f) > 16 {
			t.Errorf("a flush carried %d items, want <= MaxBatch 16", len(f))
		}
		if len(f) > 1 {
			shared++
		}
		for _, id := range f {
			seen[id]++
		}
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("item %d flushed %d times, want once", id, c)
		}
	}
	if p := r.peak.Load(); p > 2 {
		t.Errorf("%d flushes in flight at once, want <= Slots 2", p)
	}
	if len(r.flushes) >= n/2 {
		t.Errorf("%d flushes for %d concurrent items, want them shared", len(r.flushes), n)
	}
	if r.ctxErrs != 0 {
		t.Errorf("%d flushes ran under an ended ctx", r.ctxErrs)
	}
	if shared == 0 || r.deadlines < shared {
		t.Errorf("%d of %d shared flushes had a deadline, want all (Timeout)", r.deadlines, shared)
	}
	t.Logf("%d items in %d flushes (%d shared)", n, len(r.flushes), shared)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight != 0 || len(g.pending) != 0 {
		t.Errorf("after the work: %d in flight, %d pending, want 0 and 0", g.inflight, len(g.pending))
	}
}

// TestWaitPrefersAnAnswer: an answer already there wins over an ended ctx;
// without one, Wait returns the ctx's error.
func TestWaitPrefersAnAnswer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	close(done)
	for range 100 {
		if err := Wait(ctx, done); err != nil {
			t.Fatalf("Wait with an answer = %v, want nil", err)
		}
	}
	if err := Wait(ctx, make(chan struct{})); err != context.Canceled {
		t.Errorf("Wait without an answer = %v, want context.Canceled", err)
	}
}
