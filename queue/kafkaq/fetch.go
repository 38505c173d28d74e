package kafkaq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// This file holds the Kafka consumer's reads: per owned partition, a reader
// fetching the log in order into the tenants' FIFOs, and a refill reader
// that reads again the jobs an overflowing tenant left in Kafka. Both use
// kafka.Client.Fetch: one request at a time, nothing buffered behind the
// caller's back, so a paused partition holds nothing it has not handed to a
// FIFO, and a cancelled context ends a read at once (kafka-go's
// Reader.Close may hang).

// record is one message as the consumer keeps it.
type record struct {
	offset int64
	tenant string // header sluice-tenant, else the key
	jobID  string // header sluice-job-id
	value  []byte
}

// fetch sends one Fetch request for partition from offset and returns the
// records at or above from, and the partition's high watermark. want, when
// not nil, selects the tenants whose values are copied; the others come
// without a value.
func (c *Consumer) fetch(ctx context.Context, partition int, from int64, want func(tenant string) bool) ([]record, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.FetchMaxWait+callTimeout)
	defer cancel()
	res, err := c.client.Fetch(ctx, &kafka.FetchRequest{
		Topic: c.cfg.Kafka.Topic, Partition: partition, Offset: from,
		MinBytes: 1, MaxBytes: int64(c.cfg.FetchMaxBytes), MaxWait: c.cfg.FetchMaxWait,
	})
	if err != nil {
		return nil, 0, err
	}
	if res.Error != nil {
		return nil, res.HighWatermark, res.Error
	}
	var out []record
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			if errors.Is(err, io.EOF) || len(out) > 0 {
				break // a batch cut at MaxBytes ends the response
			}
			return nil, res.HighWatermark, err
		}
		if r.Offset < from {
			continue // a batch may start before the offset asked for
		}
		rec := record{offset: r.Offset}
		for _, h := range r.Headers {
			switch h.Key {
			case HeaderTenant:
				rec.tenant = string(h.Value)
			case HeaderJobID:
				rec.jobID = string(h.Value)
			}
		}
		if rec.tenant == "" && r.Key != nil {
			k, _ := kafka.ReadAll(r.Key)
			rec.tenant = string(k)
		}
		if want == nil || want(rec.tenant) {
			if rec.value, err = kafka.ReadAll(r.Value); err != nil {
				return nil, res.HighWatermark, fmt.Errorf("read value at offset %d: %w", r.Offset, err)
			}
		}
		out = append(out, rec)
	}
	return out, res.HighWatermark, nil
}

// readPartition fetches p from its read position into the FIFOs until ctx
// ends, waiting while p is paused at a bound. Errors are retried with
// backoff; a read position below the log start (deleted by retention) moves
// to the log start.
func (c *Consumer) readPartition(ctx context.Context, p *partState) {
	pause := errorPause
	for c.waitResume(ctx, p) {
		c.mu.Lock()
		from := p.head
		c.mu.Unlock()
		recs, hwm, err := c.fetch(ctx, p.id, from, nil)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.m.errors.WithLabelValues("fetch").Inc()
			if errors.Is(err, kafka.OffsetOutOfRange) && c.skipToLogStart(ctx, p) {
				continue
			}
			c.log.Warn("kafka consumer: fetch", "partition", p.id, "offset", from, "err", err, "pause", pause.String())
			sleepCtx(ctx, pause)
			pause = min(pause*2, errorPauseMax)
			continue
		}
		pause = errorPause
		for _, r := range c.take(p, recs, hwm) {
			c.deadLetterOrphan(ctx, p, r)
		}
	}
}

// waitResume waits while p is paused; it reports false when ctx ended.
func (c *Consumer) waitResume(ctx context.Context, p *partState) bool {
	for {
		c.mu.Lock()
		paused := p.paused
		c.mu.Unlock()
		if !paused {
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-p.resume:
		}
	}
}

// take puts fetched records into their FIFOs and moves the read position
// past them (offsets skipped by the log, such as compacted ones, count as
// finished). It stops at a bound (the partition pauses; the records not
// taken are fetched again when it resumes), so the bounds hold exactly. It
// returns the records without a valid tenant, which no FIFO can take: the
// caller dead-letters them.
func (c *Consumer) take(p *partState, recs []record, hwm int64) []record {
	c.mu.Lock()
	defer c.mu.Unlock()
	p.hwm = max(p.hwm, hwm)
	var orphans []record
	for _, r := range recs {
		if r.offset < p.head {
			continue
		}
		if c.checkPauseLocked(p) {
			break
		}
		if r.offset > p.head {
			p.win.finishRange(p.head, r.offset)
		}
		p.head = r.offset + 1
		switch {
		case p.win.finished(r.offset): // finished before the last commit
		case !keys.ValidTenant(r.tenant):
			orphans = append(orphans, r)
		default:
			c.addLocked(p, c.fifoLocked(p, r.tenant), r.offset, r.value, r.jobID)
		}
	}
	c.checkPauseLocked(p)
	return orphans
}

// deadLetterOrphan writes a message without a valid tenant to the DLQ as
// poison and marks its offset finished, retrying the write until ctx ends
// (then the offset stays unfinished and the next owner tries again).
func (c *Consumer) deadLetterOrphan(ctx context.Context, p *partState, r record) {
	src := sourceOf(c.cfg.Kafka.Topic, p.id, r.offset)
	id := r.jobID
	if id == "" {
		var v struct{ ID string }
		if json.Unmarshal(r.value, &v) == nil && v.ID != "" {
			id = v.ID
		} else {
			id = src
		}
	}
	job := queue.NewClaimed("")
	job.Raw, job.Envelope = r.value, queue.Envelope{ID: id, Tenant: r.tenant, Cost: 1}
	dead := &queue.DeadLetter{Reason: "poison", Error: fmt.Sprintf("message has no valid tenant in its key or %s header (got %q)", HeaderTenant, r.tenant), At: c.clock.Now().UTC()}
	for pause := errorPause; ; pause = min(pause*2, errorPauseMax) {
		err := c.dlq.write(ctx, job, dead, src)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		c.m.errors.WithLabelValues("dlq").Inc()
		c.log.Warn("kafka consumer: dead-letter a message without tenant", "source", src, "err", err)
		sleepCtx(ctx, pause)
	}
	c.log.Warn("kafka consumer: message without a valid tenant dead-lettered", "source", src, "tenant", r.tenant)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.state != partRevoked {
		p.win.finish(r.offset)
		c.resumeLocked(p)
	}
}

// skipToLogStart moves p's read position up to the log start when it is
// below it (the jobs there were deleted by retention before they were
// read: they are lost, and logged as such). It reports whether it moved.
func (c *Consumer) skipToLogStart(ctx context.Context, p *partState) bool {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	topic := c.cfg.Kafka.Topic
	res, err := c.client.ListOffsets(cctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {kafka.FirstOffsetOf(p.id)}}})
	if err != nil || len(res.Topics[topic]) != 1 || res.Topics[topic][0].Error != nil {
		c.m.errors.WithLabelValues("list_offsets").Inc()
		return false
	}
	first := res.Topics[topic][0].FirstOffset
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.head >= first {
		return false
	}
	c.log.Error("kafka consumer: jobs deleted by retention before they were read",
		"partition", p.id, "from", p.head, "to", first)
	p.win.finishRange(p.head, first)
	p.head = first
	return true
}

// refillPartition runs p's refill reads until ctx ends: each queued FIFO is
// read again from the first job it left in Kafka.
func (c *Consumer) refillPartition(ctx context.Context, p *partState) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.refillWake:
		}
		for ctx.Err() == nil {
			c.mu.Lock()
			if len(p.refills) == 0 {
				c.mu.Unlock()
				break
			}
			f := p.refills[0]
			p.refills = p.refills[1:]
			c.mu.Unlock()
			c.refill(ctx, p, f)
		}
	}
}

// refill reads f's tenant's jobs again from f.from, skipping the other
// tenants' messages, until the FIFO is full again or the read reaches the
// partition reader's position (then the FIFO stops overflowing and the
// partition reader takes the tenant's jobs again).
func (c *Consumer) refill(ctx context.Context, p *partState, f *fifo) {
	tenant := f.tq.name
	want := func(t string) bool { return t == tenant }
	pause := errorPause
	for ctx.Err() == nil {
		c.mu.Lock()
		from := f.from
		c.mu.Unlock()
		recs, _, err := c.fetch(ctx, p.id, from, want)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			c.m.errors.WithLabelValues("fetch").Inc()
			c.log.Warn("kafka consumer: refill fetch", "partition", p.id, "tenant", tenant, "offset", from, "err", err)
			sleepCtx(ctx, pause)
			pause = min(pause*2, errorPauseMax)
			continue
		}
		pause = errorPause
		if c.takeRefill(p, f, recs, from) {
			return
		}
	}
	c.mu.Lock()
	f.queued = false
	c.mu.Unlock()
}

// takeRefill adds the refilled records of f's tenant to f. It reports
// whether this refill is over (the FIFO is full, the partition is at its
// bound, the read caught up, or the partition is being let go).
func (c *Consumer) takeRefill(p *partState, f *fifo, recs []record, from int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.state != partActive || !f.over {
		f.queued = false
		return true
	}
	next := from
	for _, r := range recs {
		if r.offset >= p.head {
			break
		}
		next = r.offset + 1
		if r.tenant != f.tq.name || p.win.finished(r.offset) {
			continue
		}
		if f.held >= c.cfg.MaxTenantJobs || p.held >= c.cfg.MaxPartitionJobs {
			f.from, f.queued = r.offset, false
			if p.held >= c.cfg.MaxPartitionJobs {
				p.refillBlocked = true
			}
			return true
		}
		c.pushLocked(p, f, r.offset, r.value, r.jobID)
	}
	f.from = next
	if next >= p.head {
		f.over, f.queued = false, false
		return true
	}
	return false
}
