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
	big := acquireAsync(t, r, ctx, 16, 1) // clamped to 4: waits for all 4
	small := acquireAsync(t, r, ctx, 1, 2)
	select {
	case n := <-small:
		t.Fatalf("a later acquire of 1 got %d places before the earlier acquire of 4", n)
	case <-time.After(20 * time.Millisecond):
	}
	r.release(3)
	wantGot(t, big, 4, "acquire 16 of size 4")
	r.release(4)
	wantGot(t, small, 1, "acquire 1")
	r.release(1)
	wantIdle(t, r)
}

// TestRoomCancel: a waiter whose ctx ends holds nothing and no longer
// blocks the ones behind it.
func TestRoomCancel(t *testing.T) {
	r := newRoom(2)
	bg := context.Background()
	r.acquire(bg, 2)
	ctx, cancel := context.WithCancel(bg)
	gone := acquireAsync(t, r, ctx, 2, 1)
	next := acquireAsync(t, r, bg, 1, 2)
	cancel()
	wantGot(t, gone, 0, "cancelled acquire")
	r.release(1)
	wantGot(t, next, 1, "the acquire behind the cancelled one")
	r.release(2)
	wantIdle(t, r)
}

// TestRoomAcquireFront: a place taken at a send granted ahead goes before
// every waiter: at once while one is free even with a batch waiting, else
// it is the next place that comes free, and a cancelled one holds none.
func TestRoomAcquireFront(t *testing.T) {
	r := newRoom(4)
	bg := context.Background()
	r.acquire(bg, 3)
	batch := acquireAsync(t, r, bg, 4, 1) // waits for all 4
	if !r.acquireFront(bg) {
		t.Fatal("acquireFront with a place free and a batch waiting: false, want the place at once")
	}
	front := make(chan bool, 1)
	go func() { front <- r.acquireFront(bg) }()
	waitWaiters(t, r, 2)
	r.mu.Lock()
	first := r.waiters[0].n
	r.mu.Unlock()
	if first != 1 {
		t.Fatalf("the first waiter wants %d places, want acquireFront's 1", first)
	}
	r.release(1)
	if !<-front {
		t.Fatal("acquireFront waiting: false, want the place that came free")
	}
	ctx, cancel := context.WithCancel(bg)
	gone := make(chan bool, 1)
	go func() { gone <- r.acquireFront(ctx) }()
	waitWaiters(t, r, 2)
	cancel()
	if <-gone {
		t.Fatal("cancelled acquireFront: true, want false")
	}
	r.release(4)
	wantGot(t, batch, 4, "the batch behind")
	r.release(4)
	wantIdle(t, r)
}

// acquireAsync starts an acquire of n in a goroutine and waits until it is
// the waiters-th waiter; its result comes on the channel.
func acquireAsync(t *testing.T, r *room, ctx context.Context, n, waiters int) <-chan int {
	t.Helper()
	got := make(chan int, 1)
	go func() { got <- r.acquire(ctx, n) }()
	waitWaiters(t, r, waiters)
	return got
}

// wantGot checks what an acquire running in a goroutine returned.
func wantGot(t *testing.T, got <-chan int, want int, what string) {
	t.Helper()
	if n := <-got; n != want {
		t.Fatalf("%s: %d places, want %d", what, n, want)
	}
}

// wantIdle checks that every place is back and nobody waits.
func wantIdle(t *testing.T, r *room) {
	t.Helper()
	if r.free != r.size || len(r.waiters) != 0 {
		t.Fatalf("after every release: %d of %d free, %d waiters; want all free, none waiting", r.free, r.size, len(r.waiters))
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
