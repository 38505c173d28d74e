package kafkaq

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// This file holds one consumer-group generation of the Kafka consumer: take
// the assigned partitions, read them, commit their watermarks, and let them
// go when the generation ends.

// runGeneration consumes the partitions gen assigns to this member until
// genCtx ends (a rebalance, or Run closing the group), then lets them go.
// It is the generation's only Start func, so it returns only then.
func (c *Consumer) runGeneration(genCtx context.Context, gen *kafka.Generation) {
	assigned := gen.Assignments[c.cfg.Kafka.Topic]
	if c.member != nil {
		c.member.member.Store(&gen.MemberID)
	}
	ctx, cancel := context.WithCancel(genCtx)
	defer cancel()
	parts := c.startPartitions(ctx, gen, assigned)
	ids := make([]int, len(parts))
	for i, p := range parts {
		ids[i] = p.id
	}
	c.log.Info("kafka consumer: partitions assigned", "group", gen.GroupID, "generation", gen.ID, "partitions", ids)

	var readers sync.WaitGroup
	for _, p := range parts {
		readers.Add(2)
		go func() { defer readers.Done(); c.readPartition(ctx, p) }()
		go func() { defer readers.Done(); c.refillPartition(ctx, p) }()
	}
	tick := time.NewTicker(c.cfg.CommitInterval)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-genCtx.Done():
			done = true
		case <-tick.C:
			cctx, ccancel := context.WithTimeout(ctx, callTimeout)
			c.observe(cctx, parts)
			c.commit(cctx, gen, c.snapshot(parts))
			ccancel()
		}
	}
	// Wind-down order: stop the readers; forget the jobs not claimed (they
	// are above the watermark, so the next owner reads them again); wait up
	// to RevokeTimeout for the claimed ones to be settled; mark the
	// partitions revoked (later settles get queue.ErrLeaseLost) and commit their
	// final watermarks with this generation's id, which the coordinator
	// still accepts while the group rebalances.
	cancel()
	readers.Wait()
	c.revoke(gen, parts)
}

// startPartitions returns the state of each assigned partition, starting at
// its committed offset (or the log start when none), with the finished
// offsets the last commit's metadata lists already marked. It retries the
// brokers until ctx ends (then it returns what it has; none are read).
func (c *Consumer) startPartitions(ctx context.Context, gen *kafka.Generation, assigned []kafka.PartitionAssignment) []*partState {
	topic := c.cfg.Kafka.Topic
	pause := errorPause
	for ctx.Err() == nil {
		parts, err := c.tryStartPartitions(ctx, gen, assigned)
		if err == nil {
			return parts
		}
		c.log.Warn("kafka consumer: read start offsets; retrying", "topic", topic, "err", err, "pause", pause.String())
		sleepCtx(ctx, pause)
		pause = min(pause*2, errorPauseMax)
	}
	return nil
}

// Pauses after a failed call to the brokers: doubling from errorPause to
// errorPauseMax.
const (
	errorPause    = 100 * time.Millisecond
	errorPauseMax = 5 * time.Second
)

// tryStartPartitions reads where each assigned partition starts (its
// committed offset, or the log start or end when none: resolveStarts) and
// the metadata of its last commit (commitMetadata), and returns the
// partitions' states, sorted by id.
func (c *Consumer) tryStartPartitions(ctx context.Context, gen *kafka.Generation, assigned []kafka.PartitionAssignment) ([]*partState, error) {
	if len(assigned) == 0 {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resolved, err := c.resolveStarts(cctx, assigned)
	if err != nil {
		return nil, err
	}
	meta, err := c.commitMetadata(cctx, gen.GroupID, assigned)
	if err != nil {
		return nil, err
	}
	parts := make([]*partState, 0, len(assigned))
	for _, a := range assigned {
		start := a.Offset
		if start < 0 {
			s, ok := resolved[a.ID]
			if !ok {
				return nil, fmt.Errorf("no start offset for partition %d", a.ID)
			}
			start = s
		}
		p := newPartState(a.ID, start)
		if a.Offset >= 0 {
			p.committed = start // else -1: the first tick commits the start
		}
		if m, ok := meta[a.ID]; ok && m.CommittedOffset == start && m.Metadata != "" {
			if err := p.win.applyFinished(m.Metadata, c.cfg.MaxWindow); err != nil {
				c.log.Warn("kafka consumer: ignoring commit metadata; finished jobs above the offset will come again",
					"partition", a.ID, "offset", start, "err", err)
			}
			p.committedMeta = m.Metadata
		}
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].id < parts[j].id })
	return parts, nil
}

// resolveStarts returns, for each assigned partition with nothing committed
// (FirstOffset or LastOffset), the offset that stands for: the log start or
// end, read with one ListOffsets.
func (c *Consumer) resolveStarts(ctx context.Context, assigned []kafka.PartitionAssignment) (map[int]int64, error) {
	topic := c.cfg.Kafka.Topic
	var ask []kafka.OffsetRequest
	last := map[int]bool{}
	for _, a := range assigned {
		if a.Offset < 0 { // FirstOffset or LastOffset: nothing committed yet
			ask = append(ask, kafka.OffsetRequest{Partition: a.ID, Timestamp: a.Offset})
			last[a.ID] = a.Offset == kafka.LastOffset
		}
	}
	resolved := map[int]int64{}
	if len(ask) == 0 {
		return resolved, nil
	}
	res, err := c.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: ask}})
	if err != nil {
		c.m.errors.WithLabelValues("list_offsets").Inc()
		return nil, err
	}
	for _, po := range res.Topics[topic] {
		if po.Error != nil {
			c.m.errors.WithLabelValues("list_offsets").Inc()
			return nil, fmt.Errorf("partition %d: %w", po.Partition, po.Error)
		}
		resolved[po.Partition] = po.FirstOffset
		if last[po.Partition] {
			resolved[po.Partition] = po.LastOffset
		}
	}
	return resolved, nil
}

// commitMetadata returns the group's last commit of each assigned
// partition (offset and metadata), read with one OffsetFetch.
func (c *Consumer) commitMetadata(ctx context.Context, group string, assigned []kafka.PartitionAssignment) (map[int]kafka.OffsetFetchPartition, error) {
	topic := c.cfg.Kafka.Topic
	ids := make([]int, len(assigned))
	for i, a := range assigned {
		ids[i] = a.ID
	}
	of, err := c.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ids}})
	if err == nil && of.Error != nil {
		err = of.Error
	}
	if err != nil {
		c.m.errors.WithLabelValues("offset_fetch").Inc()
		return nil, err
	}
	meta := map[int]kafka.OffsetFetchPartition{}
	for _, op := range of.Topics[topic] {
		meta[op.Partition] = op
	}
	return meta, nil
}

// pendingCommit is one partition's offset and metadata to commit.
type pendingCommit struct {
	p      *partState
	offset int64
	meta   string
}

// snapshot returns the commits the partitions need: those whose watermark
// or metadata changed since their last commit.
func (c *Consumer) snapshot(parts []*partState) []pendingCommit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked(parts)
}

func (c *Consumer) snapshotLocked(parts []*partState) []pendingCommit {
	var out []pendingCommit
	for _, p := range parts {
		wm, meta := p.win.watermark(), p.win.encodeFinished(metaMaxLen)
		if wm != p.committed || meta != p.committedMeta {
			out = append(out, pendingCommit{p: p, offset: wm, meta: meta})
		}
	}
	return out
}

// commit sends the pending commits in one OffsetCommit request with the
// generation's id and member id, and reports whether all were accepted.
// Failures are logged and counted; the next tick tries again.
func (c *Consumer) commit(ctx context.Context, gen *kafka.Generation, pending []pendingCommit) bool {
	if len(pending) == 0 {
		return true
	}
	commits := make([]kafka.OffsetCommit, len(pending))
	for i, pc := range pending {
		commits[i] = kafka.OffsetCommit{Partition: pc.p.id, Offset: pc.offset, Metadata: pc.meta}
	}
	topic := c.cfg.Kafka.Topic
	res, err := c.client.OffsetCommit(ctx, &kafka.OffsetCommitRequest{
		GroupID: gen.GroupID, GenerationID: int(gen.ID), MemberID: gen.MemberID,
		Topics: map[string][]kafka.OffsetCommit{topic: commits},
	})
	if err != nil {
		if ctx.Err() != nil {
			return false // the generation ended during a periodic commit; the final one follows
		}
		c.m.errors.WithLabelValues("commit").Inc()
		c.log.Warn("kafka consumer: commit offsets", "generation", gen.ID, "partitions", len(commits), "err", err)
		return false
	}
	refused := map[int]error{}
	for _, r := range res.Topics[topic] {
		if r.Error != nil {
			refused[r.Partition] = r.Error
		}
	}
	if len(refused) > 0 {
		c.m.errors.WithLabelValues("commit").Inc()
		c.log.Warn("kafka consumer: commit offsets refused", "generation", gen.ID, "errors", fmt.Sprint(refused))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pc := range pending {
		if _, bad := refused[pc.p.id]; !bad {
			pc.p.committed, pc.p.committedMeta = pc.offset, pc.meta
		}
	}
	return len(refused) == 0
}

// observe publishes each partition's lag, held jobs and pause state. The
// high watermark comes with every fetch; a paused partition does not fetch,
// so its watermark is read with ListOffsets.
func (c *Consumer) observe(ctx context.Context, parts []*partState) {
	topic := c.cfg.Kafka.Topic
	var ask []kafka.OffsetRequest
	c.mu.Lock()
	for _, p := range parts {
		if p.paused {
			ask = append(ask, kafka.LastOffsetOf(p.id))
		}
	}
	c.mu.Unlock()
	if len(ask) > 0 {
		res, err := c.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: ask}})
		if err != nil {
			c.m.errors.WithLabelValues("list_offsets").Inc()
		} else {
			c.mu.Lock()
			for _, po := range res.Topics[topic] {
				for _, p := range parts {
					if p.id == po.Partition && po.Error == nil {
						p.hwm = max(p.hwm, po.LastOffset)
					}
				}
			}
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		if p.state == partRevoked {
			continue
		}
		id := strconv.Itoa(p.id)
		c.m.lag.WithLabelValues(topic, id).Set(float64(max(p.hwm-p.win.watermark(), 0)))
		c.m.heldJobs.WithLabelValues(topic, id).Set(float64(p.held))
		paused := 0.0
		if p.paused {
			paused = 1
		}
		c.m.paused.WithLabelValues(topic, id).Set(paused)
	}
}

// revoke lets the generation's partitions go: see runGeneration.
func (c *Consumer) revoke(gen *kafka.Generation, parts []*partState) {
	c.mu.Lock()
	for _, p := range parts {
		p.state = partRevoking
		c.dropQueuedLocked(p)
	}
	c.mu.Unlock()
	deadline := time.NewTimer(c.cfg.RevokeTimeout)
	defer deadline.Stop()
	stopBeat := c.heartbeatWhileRevoking(gen)
	for waiting := true; waiting; {
		c.mu.Lock()
		n := 0
		for _, p := range parts {
			n += p.claimed
		}
		c.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-c.settled:
		case <-deadline.C:
			c.log.Warn("kafka consumer: claimed jobs not settled before the partitions were let go; they will be delivered again",
				"jobs", n, "revoke_timeout", c.cfg.RevokeTimeout.String())
			waiting = false
		}
	}
	stopBeat()
	c.mu.Lock()
	for _, p := range parts {
		p.state = partRevoked
		c.m.forget(c.cfg.Kafka.Topic, p.id)
	}
	pending := c.snapshotLocked(parts)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if c.commit(ctx, gen, pending) && len(pending) > 0 {
		offsets := make(map[int]int64, len(pending))
		for _, pc := range pending {
			offsets[pc.p.id] = pc.offset
		}
		c.log.Info("kafka consumer: partitions let go", "generation", gen.ID, "committed", fmt.Sprint(offsets))
	}
}

// heartbeatWhileRevoking keeps this member of gen alive in the group while
// revoke waits for its deliveries: kafka-go stops heartbeating once the
// generation ends, and the coordinator expires a member that has not joined
// again and sent nothing for SessionTimeout, so a wait longer than that
// would hand the partitions over while the deliveries still run. It sends a
// Heartbeat every HeartbeatInterval (the answer, REBALANCE_IN_PROGRESS, is
// expected) until the returned stop is called.
func (c *Consumer) heartbeatWhileRevoking(gen *kafka.Generation) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(c.cfg.HeartbeatInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			_, _ = c.client.Heartbeat(ctx, &kafka.HeartbeatRequest{GroupID: gen.GroupID, GenerationID: gen.ID, MemberID: gen.MemberID})
			cancel()
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
