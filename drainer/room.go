package drainer

import (
	"context"
	"slices"
	"sync"
)

// room is MaxInFlight's places: a counting semaphore whose acquire of n
// places is whole and first come, first served. A pull loop reserves its
// take's batch before the call (take), and with all-or-nothing grants the
// batch stays whole under load: with places handed out one by one as they
// came free, 24 loops (12 unlimited tenants) shared 256 places in takes of
// about 5 jobs, not 16, and paid a take.lua call per 5 jobs.
type room struct {
	mu      sync.Mutex
	size    int
	free    int
	waiters []*roomWaiter // in arrival order
}

// roomWaiter is one acquire waiting for n places; ready is closed when
// they are its.
type roomWaiter struct {
	n     int
	ready chan struct{}
}

func newRoom(size int) *room { return &room{size: size, free: size} }

// acquire takes min(n, size) places, waiting until they are free and every
// earlier waiter is served. It returns how many it took, 0 when ctx ended
// first (then it holds none).
func (r *room) acquire(ctx context.Context, n int) int {
	n = max(1, min(n, r.size))
	r.mu.Lock()
	if len(r.waiters) == 0 && r.free >= n {
		r.free -= n
		r.mu.Unlock()
		return n
	}
	w := &roomWaiter{n: n, ready: make(chan struct{})}
	r.waiters = append(r.waiters, w)
	r.mu.Unlock()
	if r.await(ctx, w) {
		return n
	}
	return 0
}

// await waits until w is granted and reports true; when ctx ends first, w
// leaves the queue (or gives back a grant made meanwhile) and await
// reports false.
func (r *room) await(ctx context.Context, w *roomWaiter) bool {
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-w.ready: // granted while ctx ended: give the places back
		r.free += w.n
	default:
		r.waiters = slices.DeleteFunc(r.waiters, func(o *roomWaiter) bool { return o == w })
	}
	r.grant()
	return false
}

// acquireFront takes one place ahead of every waiter: at once when one is
// free, else as the first waiter. A job whose outflow turn was granted
// ahead takes its place so at its send (launchTurns): its turn is spent and
// its start recorded, so it must not wait behind a take reserving a batch.
// It reports false when ctx ended first (then it holds none).
func (r *room) acquireFront(ctx context.Context) bool {
	r.mu.Lock()
	if r.free >= 1 {
		r.free--
		r.mu.Unlock()
		return true
	}
	w := &roomWaiter{n: 1, ready: make(chan struct{})}
	r.waiters = slices.Insert(r.waiters, 0, w)
	r.mu.Unlock()
	return r.await(ctx, w)
}

// release gives back n places.
func (r *room) release(n int) {
	r.mu.Lock()
	r.free += n
	r.grant()
	r.mu.Unlock()
}

// grant serves the waiters at the head whose places are free (r.mu held).
func (r *room) grant() {
	for len(r.waiters) > 0 && r.free >= r.waiters[0].n {
		w := r.waiters[0]
		r.free -= w.n
		r.waiters = r.waiters[1:]
		close(w.ready)
	}
}
