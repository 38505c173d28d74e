package drainer

import (
	"context"
	"testing"
	"time"
)

// TestRoomWholeAndInOrder: an acquire gets all its places or waits; the
// waiters are served in arrival order, a later small one not before an
// earlier large one; n is clamped to the size.
func TestRoomWholeAndInOrder(t *testing.T) {
	r := newRoom(4)
	ctx := context.Background()
	if got := r.acquire(ctx, 3); got != 3 {
		t.Fatalf("acquire 3 of 4 free: %d", got)
	}
	big, small := make(chan int, 1), make(chan int, 1)
	go func() { big <- r.acquire(ctx, 16) }() // clamped to 4: waits for all 4
	waitWaiters(t, r, 1)
	go func() { small <- r.acquire(ctx, 1) }()
	waitWaiters(t, r, 2)
	select {
	case n := <-small:
		t.Fatalf("a later acquire of 1 got %d places before the earlier acquire of 4", n)
	case <-time.After(20 * time.Millisecond):
	}
	r.release(3)
	if n := <-big; n != 4 {
		t.Fatalf("acquire 16 of size 4: %d, want 4", n)
	}
	r.release(4)
	if n := <-small; n != 1 {
		t.Fatalf("acquire 1: %d", n)
	}
	r.release(1)
	if r.free != 4 || len(r.waiters) != 0 {
		t.Fatalf("after every release: %d free, %d waiters; want 4, 0", r.free, len(r.waiters))
	}
}

// TestRoomCancel: a waiter whose ctx ends holds nothing and no longer
// blocks the ones behind it.
func TestRoomCancel(t *testing.T) {
	r := newRoom(2)
	bg := context.Background()
	r.acquire(bg, 2)
	ctx, cancel := context.WithCancel(bg)
	gone := make(chan int, 1)
	go func() { gone <- r.acquire(ctx, 2) }()
	waitWaiters(t, r, 1)
	next := make(chan int, 1)
	go func() { next <- r.acquire(bg, 1) }()
	waitWaiters(t, r, 2)
	cancel()
	if n := <-gone; n != 0 {
		t.Fatalf("cancelled acquire: %d places, want 0", n)
	}
	r.release(1)
	if n := <-next; n != 1 {
		t.Fatalf("the acquire behind the cancelled one: %d", n)
	}
	r.release(2)
	if r.free != 2 || len(r.waiters) != 0 {
		t.Fatalf("after every release: %d free, %d waiters; want 2, 0", r.free, len(r.waiters))
	}
}

func waitWaiters(t *testing.T, r *room, n int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		r.mu.Lock()
		got := len(r.waiters)
		r.mu.Unlock()
		if got == n {
			return
		}
	}
	t.Fatalf("waiters never reached %d", n)
}

// TestTakeBatch: takeMax at first and while takes come back full; after a
// short take one more than it got, doubling back up as takes fill.
func TestTakeBatch(t *testing.T) {
	var b takeBatch
	steps := []struct{ got, want int }{
		{takeMax, takeMax}, // full: stays at takeMax
		{3, 4},             // short: one more than it got
		{0, 1},             // empty: one
		{1, 2}, {2, 4}, {4, 8}, {8, 16}, {16, takeMax},
	}
	for i, s := range steps {
		b.took(b.size(), s.got)
		if got := b.size(); got != s.want {
			t.Fatalf("step %d (took %d): next size %d, want %d", i, s.got, got, s.want)
		}
	}
}
