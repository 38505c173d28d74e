package queue

import (
	"container/heap"
	"time"
)

// This file holds the Kafka consumer's in-memory state: per partition, one
// lane (a FIFO) per tenant, the finished-offset window and the bounds; per
// tenant, its lanes across partitions and its deferred retries. Every field
// here is guarded by KafkaConsumer.mu. See docs/adr/0005-kafka-lanes.md.

// partState is the state of one partition owned in one generation.
type partState struct {
	id    int
	win   offsetWindow
	head  int64 // next offset the partition reader fetches
	hwm   int64 // high watermark, as last seen
	held  int   // jobs in memory: queued in lanes, deferred and claimed
	lanes map[string]*lane

	claimed int           // jobs handed out by Claim and not settled
	state   partStatus    // active → revoking → revoked
	paused  bool          // at a bound; the reader waits for resume
	resume  chan struct{} // cap 1; signalled when the partition may read again

	refills       []*lane       // lanes waiting for a refill read
	refillWake    chan struct{} // cap 1
	refillBlocked bool          // a refill stopped at the partition bound

	committed     int64  // last committed offset
	committedMeta string // and its metadata
}

type partStatus int

const (
	partActive   partStatus = iota
	partRevoking            // generation ended: no new claims; settles still count
	partRevoked             // committed and released: settles return ErrLeaseLost
)

func newPartState(id int, start int64) *partState {
	return &partState{
		id: id, win: newOffsetWindow(start), head: start, hwm: start,
		lanes:  map[string]*lane{},
		resume: make(chan struct{}, 1), refillWake: make(chan struct{}, 1),
		committed: -1,
	}
}

// lane is one tenant's jobs in one partition.
type lane struct {
	p      *partState
	tq     *tenantQueue
	q      entryDeque // read, not yet claimed, in offset order (releases go first)
	held   int        // this lane's jobs in memory: queued, deferred and claimed
	over   bool       // overflow: the tenant's later jobs in this partition are left in Kafka
	from   int64      // while over: the first offset left in Kafka
	queued bool       // in p.refills
}

// tenantQueue is one tenant's lanes across the partitions this consumer
// owns, and its deferred retries.
type tenantQueue struct {
	name     string
	lanes    []*lane
	rr       int // next lane to take from (round robin across partitions)
	deferred deferHeap
	wake     chan struct{} // cap 1; signalled when a job may be claimable
}

// entry is one job in memory.
type entry struct {
	lane   *lane
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
func (c *KafkaConsumer) tenantLocked(name string) *tenantQueue {
	tq, ok := c.tenants[name]
	if !ok {
		tq = &tenantQueue{name: name, wake: make(chan struct{}, 1)}
		c.tenants[name] = tq
	}
	return tq
}

// laneLocked returns tenant's lane in p, creating it.
func (c *KafkaConsumer) laneLocked(p *partState, tenant string) *lane {
	ln, ok := p.lanes[tenant]
	if !ok {
		tq := c.tenantLocked(tenant)
		ln = &lane{p: p, tq: tq}
		p.lanes[tenant] = ln
		tq.lanes = append(tq.lanes, ln)
	}
	return ln
}

// dropLaneLocked forgets an empty lane.
func dropLaneLocked(ln *lane) {
	delete(ln.p.lanes, ln.tq.name)
	tq := ln.tq
	for i, l := range tq.lanes {
		if l == ln {
			tq.lanes = append(tq.lanes[:i], tq.lanes[i+1:]...)
			break
		}
	}
	if tq.rr >= len(tq.lanes) {
		tq.rr = 0
	}
}

// addLocked puts the job read at offset into its tenant's lane, or leaves
// it in Kafka when the lane is at its bound (the lane overflows and a refill
// reads it again later). It reports whether the job was taken into memory.
func (c *KafkaConsumer) addLocked(p *partState, ln *lane, offset int64, raw []byte, jobID string) bool {
	if ln.over {
		return false
	}
	if ln.held >= c.cfg.MaxTenantJobs {
		ln.over, ln.from = true, offset
		c.m.overflows.Inc()
		return false
	}
	c.pushLocked(p, ln, offset, raw, jobID)
	return true
}

// pushLocked appends a job to ln and wakes a Claim waiting for its tenant.
func (c *KafkaConsumer) pushLocked(p *partState, ln *lane, offset int64, raw []byte, jobID string) {
	ln.q.pushBack(&entry{lane: ln, offset: offset, raw: raw, jobID: jobID, index: -1})
	ln.held++
	p.held++
	signal(ln.tq.wake)
}

// checkPauseLocked pauses p at a bound: MaxPartitionJobs jobs in memory, or
// MaxWindow offsets between the watermark and the read position. It
// reports whether p is paused.
func (c *KafkaConsumer) checkPauseLocked(p *partState) bool {
	if !p.paused && (p.held >= c.cfg.MaxPartitionJobs || p.head-p.win.watermark() >= c.cfg.MaxWindow) {
		p.paused = true
		c.log.Info("kafka consumer: partition paused at its bound", "partition", p.id,
			"jobs", p.held, "window", p.head-p.win.watermark())
	}
	return p.paused
}

// resumeLocked resumes a paused partition once it is below half of both
// bounds.
func (c *KafkaConsumer) resumeLocked(p *partState) {
	if p.paused && p.held < c.cfg.MaxPartitionJobs/2 && p.head-p.win.watermark() < c.cfg.MaxWindow/2 {
		p.paused = false
		signal(p.resume)
	}
}

// releasedLocked updates p after one of ln's jobs left memory: it resumes
// the partition, queues refills, and forgets ln when it is empty.
func (c *KafkaConsumer) releasedLocked(p *partState, ln *lane) {
	c.resumeLocked(p)
	if p.refillBlocked && p.held < c.cfg.MaxPartitionJobs/2 {
		p.refillBlocked = false
		for _, l := range p.lanes {
			c.queueRefillLocked(l)
		}
	}
	c.queueRefillLocked(ln)
	if ln.held == 0 && !ln.over && ln.q.len() == 0 {
		dropLaneLocked(ln)
	}
}

// queueRefillLocked queues a refill read for an overflowing lane that has
// drained below half its bound.
func (c *KafkaConsumer) queueRefillLocked(ln *lane) {
	if ln.over && !ln.queued && ln.held < c.cfg.MaxTenantJobs/2 && ln.p.state == partActive {
		ln.queued = true
		ln.p.refills = append(ln.p.refills, ln)
		signal(ln.p.refillWake)
	}
}

// popLocked takes the tenant's next job: a deferred retry that is due, else
// the head of its lanes in turn. It returns nil and the earliest due time of
// a deferred retry (zero when none) when nothing is claimable.
func popLocked(tq *tenantQueue, now time.Time) (*entry, time.Time) {
	if len(tq.deferred) > 0 && !tq.deferred[0].due.After(now) {
		return heap.Pop(&tq.deferred).(*entry), time.Time{}
	}
	for i, n := 0, len(tq.lanes); i < n; i++ {
		k := (tq.rr + i) % n
		if e := tq.lanes[k].q.popFront(); e != nil {
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
func (c *KafkaConsumer) dropQueuedLocked(p *partState) {
	for _, ln := range p.lanes {
		p.held -= ln.q.len()
		ln.q = entryDeque{}
		ln.over, ln.queued = false, false
		tq := ln.tq
		kept := tq.deferred[:0]
		for _, e := range tq.deferred {
			if e.lane.p != p {
				e.index = len(kept)
				kept = append(kept, e)
			}
		}
		for i := len(kept); i < len(tq.deferred); i++ {
			tq.deferred[i] = nil
		}
		tq.deferred = kept
		heap.Init(&tq.deferred)
		dropLaneLocked(ln)
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
