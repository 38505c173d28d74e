package kafkaq

import (
	"container/heap"
	"time"
)

// This file holds the Kafka consumer's in-memory state: per partition, one
// FIFO per tenant, the finished-offset window and the bounds; per tenant,
// its FIFOs across partitions and its deferred retries. Every field
// here is guarded by Consumer.mu. See docs/adr/0005-kafka-lanes.md.

// partState is the state of one partition owned in one generation.
type partState struct {
	id    int
	win   offsetWindow
	head  int64 // next offset the partition reader fetches
	hwm   int64 // high watermark, as last seen
	held  int   // jobs in memory: queued in FIFOs, deferred and claimed
	fifos map[string]*fifo

	claimed int           // jobs handed out by Claim and not settled
	state   partStatus    // active → revoking → revoked
	paused  bool          // at a bound; the reader waits for resume
	resume  chan struct{} // cap 1; signalled when the partition may read again

	refills       []*fifo       // FIFOs waiting for a refill read
	refillWake    chan struct{} // cap 1
	refillBlocked bool          // a refill stopped at the partition bound

	committed     int64  // last committed offset
	committedMeta string // and its metadata
}

type partStatus int

const (
	partActive   partStatus = iota
	partRevoking            // generation ended: no new claims; settles still count
	partRevoked             // committed and released: settles return queue.ErrLeaseLost
)

func newPartState(id int, start int64) *partState {
	return &partState{
		id: id, win: newOffsetWindow(start), head: start, hwm: start,
		fifos:  map[string]*fifo{},
		resume: make(chan struct{}, 1), refillWake: make(chan struct{}, 1),
		committed: -1,
	}
}

// fifo is one tenant's jobs in one partition, in memory: the unit a
// partition's jobs are split into so that no tenant waits behind another.
type fifo struct {
	p      *partState
	tq     *tenantQueue
	q      entryDeque // read, not yet claimed, in offset order (releases go first)
	held   int        // this FIFO's jobs in memory: queued, deferred and claimed
	over   bool       // overflow: the tenant's later jobs in this partition are left in Kafka
	from   int64      // while over: the first offset left in Kafka
	queued bool       // in p.refills
}

// tenantQueue is one tenant's FIFOs across the partitions this consumer
// owns, and its deferred retries.
type tenantQueue struct {
	name     string
	fifos    []*fifo
	rr       int // next FIFO to take from (round robin across partitions)
	deferred deferHeap
	wake     chan struct{} // cap 1; signalled when a job may be claimable
}

// entry is one job in memory.
type entry struct {
	fifo   *fifo
	offset int64
	raw    []byte
	jobID  string    // from the message header, for a poison job
	due    time.Time // deferred: when it may be claimed again
	index  int       // position in tenantQueue.deferred
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// tenantLocked returns tenant's queue, creating it.
func (c *Consumer) tenantLocked(name string) *tenantQueue {
	tq, ok := c.tenants[name]
	if !ok {
		tq = &tenantQueue{name: name, wake: make(chan struct{}, 1)}
		c.tenants[name] = tq
	}
	return tq
}

// fifoLocked returns tenant's FIFO in p, creating it.
func (c *Consumer) fifoLocked(p *partState, tenant string) *fifo {
	f, ok := p.fifos[tenant]
	if !ok {
		tq := c.tenantLocked(tenant)
		f = &fifo{p: p, tq: tq}
		p.fifos[tenant] = f
		tq.fifos = append(tq.fifos, f)
	}
	return f
}

// dropFIFOLocked forgets an empty FIFO.
func dropFIFOLocked(f *fifo) {
	delete(f.p.fifos, f.tq.name)
	tq := f.tq
	for i, l := range tq.fifos {
		if l == f {
			tq.fifos = append(tq.fifos[:i], tq.fifos[i+1:]...)
			break
		}
	}
	if tq.rr >= len(tq.fifos) {
		tq.rr = 0
	}
}

// addLocked puts the job read at offset into its tenant's FIFO, or leaves
// it in Kafka when the FIFO is at its bound (the FIFO overflows and a refill
// reads it again later). It reports whether the job was taken into memory.
func (c *Consumer) addLocked(p *partState, f *fifo, offset int64, raw []byte, jobID string) bool {
	if f.over {
		return false
	}
	if f.held >= c.cfg.MaxTenantJobs {
		f.over, f.from = true, offset
		c.m.overflows.Inc()
		return false
	}
	c.pushLocked(p, f, offset, raw, jobID)
	return true
}

// pushLocked appends a job to f and wakes a Claim waiting for its tenant.
func (c *Consumer) pushLocked(p *partState, f *fifo, offset int64, raw []byte, jobID string) {
	f.q.pushBack(&entry{fifo: f, offset: offset, raw: raw, jobID: jobID, index: -1})
	f.held++
	p.held++
	signal(f.tq.wake)
}

// checkPauseLocked pauses p at a bound: MaxPartitionJobs jobs in memory, or
// MaxWindow offsets between the watermark and the read position. It
// reports whether p is paused.
func (c *Consumer) checkPauseLocked(p *partState) bool {
	if !p.paused && (p.held >= c.cfg.MaxPartitionJobs || p.head-p.win.watermark() >= c.cfg.MaxWindow) {
		p.paused = true
		c.log.Info("kafka consumer: partition paused at its bound", "partition", p.id,
			"jobs", p.held, "window", p.head-p.win.watermark())
	}
	return p.paused
}

// resumeLocked resumes a paused partition once it is below half of both
// bounds.
func (c *Consumer) resumeLocked(p *partState) {
	if p.paused && p.held < c.cfg.MaxPartitionJobs/2 && p.head-p.win.watermark() < c.cfg.MaxWindow/2 {
		p.paused = false
		signal(p.resume)
	}
}

// releasedLocked updates p after one of f's jobs left memory: it resumes
// the partition, queues refills, and forgets f when it is empty.
func (c *Consumer) releasedLocked(p *partState, f *fifo) {
	c.resumeLocked(p)
	if p.refillBlocked && p.held < c.cfg.MaxPartitionJobs/2 {
		p.refillBlocked = false
		for _, l := range p.fifos {
			c.queueRefillLocked(l)
		}
	}
	c.queueRefillLocked(f)
	if f.held == 0 && !f.over && f.q.len() == 0 {
		dropFIFOLocked(f)
	}
}

// queueRefillLocked queues a refill read for an overflowing FIFO that has
// drained below half its bound.
func (c *Consumer) queueRefillLocked(f *fifo) {
	if f.over && !f.queued && f.held < c.cfg.MaxTenantJobs/2 && f.p.state == partActive {
		f.queued = true
		f.p.refills = append(f.p.refills, f)
		signal(f.p.refillWake)
	}
}

// popLocked takes the tenant's next job: a deferred retry that is due, else
// the head of its FIFOs in turn. It returns nil and the earliest due time of
// a deferred retry (zero when none) when nothing is claimable.
func popLocked(tq *tenantQueue, now time.Time) (*entry, time.Time) {
	if len(tq.deferred) > 0 && !tq.deferred[0].due.After(now) {
		return heap.Pop(&tq.deferred).(*entry), time.Time{}
	}
	for i, n := 0, len(tq.fifos); i < n; i++ {
		k := (tq.rr + i) % n
		if e := tq.fifos[k].q.popFront(); e != nil {
			tq.rr = (k + 1) % n
			return e, time.Time{}
		}
	}
	if len(tq.deferred) > 0 {
		return nil, tq.deferred[0].due
	}
	return nil, time.Time{}
}

// dropQueuedLocked forgets p's jobs that are not claimed (queued and
// deferred): they stay unfinished, so the partition's next owner reads them
// again.
func (c *Consumer) dropQueuedLocked(p *partState) {
	for _, f := range p.fifos {
		p.held -= f.q.len()
		f.q = entryDeque{}
		f.over, f.queued = false, false
		tq := f.tq
		kept := tq.deferred[:0]
		for _, e := range tq.deferred {
			if e.fifo.p != p {
				e.index = len(kept)
				kept = append(kept, e)
			}
		}
		for i := len(kept); i < len(tq.deferred); i++ {
			tq.deferred[i] = nil
		}
		tq.deferred = kept
		heap.Init(&tq.deferred)
		dropFIFOLocked(f)
	}
	p.refills = nil
}

// entryDeque is a FIFO of entries with a cheap push to the front (Release).
type entryDeque struct {
	items []*entry
	head  int
}

func (d *entryDeque) len() int { return len(d.items) - d.head }

func (d *entryDeque) pushBack(e *entry) { d.items = append(d.items, e) }

func (d *entryDeque) pushFront(e *entry) {
	if d.head > 0 {
		d.head--
		d.items[d.head] = e
		return
	}
	d.items = append([]*entry{e}, d.items...)
}

func (d *entryDeque) popFront() *entry {
	if d.head >= len(d.items) {
		return nil
	}
	e := d.items[d.head]
	d.items[d.head] = nil
	d.head++
	if d.head == len(d.items) {
		d.items, d.head = d.items[:0], 0
	} else if d.head >= 1024 && d.head*2 >= len(d.items) {
		n := copy(d.items, d.items[d.head:])
		clear(d.items[n:])
		d.items, d.head = d.items[:n], 0
	}
	return e
}

// deferHeap orders deferred entries by due time.
type deferHeap []*entry

func (h deferHeap) Len() int           { return len(h) }
func (h deferHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h deferHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *deferHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *deferHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.index = -1
	*h = old[:n-1]
	return e
}
