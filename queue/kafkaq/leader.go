package kafkaq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
)

// This file sends the producer's produce requests (request) and puts the
// batches of several partitions led by one broker in one request, as the Java client does: each partition still has at most
// one batch in flight (sender.drain), but the partitions of a broker share
// one request at a time, and the batches that arrive while it is in flight
// leave together in the next. With 12 partitions on one broker and 128
// concurrent callers, one request per partition carried about 5 jobs and
// the broker's per-request cost capped the producer at 0.47× Kafka's own
// producer benchmark (docs/perf.md step 27).

// errRegroup tells a partition whose shared request failed as a whole to
// send its batch again in a request of its own: a leader map older than the
// transport's makes kafka-go refuse a request whose partitions it places on
// different brokers, and a request of one partition is always placed.
var errRegroup = errors.New("kafka: shared produce request failed; sending the partition alone")

// leaderQueue is the produce requests bound for one broker: at most one in
// flight; the partitions that ask meanwhile wait in pending and go together
// in the next, sent by the first of them.
type leaderQueue struct {
	mu      sync.Mutex
	busy    bool // a shared request is in flight
	pending []*partProduce
}

// partProduce is one partition's batch waiting for a shared request. done
// receives once: the outcome in err, or, with lead set, the turn to send
// lead (this partProduce first) for the broker.
type partProduce struct {
	partition int
	msgs      []message
	deadline  time.Time
	err       error
	lead      []*partProduce
	done      chan struct{}
}

// setLeaders records which broker leads each partition (leaders[p] is the
// broker id of partition p); Producer.partitionList calls it with every
// metadata read.
func (s *sender) setLeaders(leaders []int) {
	s.leaders.Store(&leaders)
}

// leaderQueue returns the queue of the broker leading partition, or nil when
// no leader is known for it.
func (s *sender) leaderQueue(partition int) *leaderQueue {
	l := s.leaders.Load()
	if l == nil || partition < 0 || partition >= len(*l) || (*l)[partition] < 0 {
		return nil
	}
	id := (*l)[partition]
	s.leaderMu.Lock()
	defer s.leaderMu.Unlock()
	q := s.byLeader[id]
	if q == nil {
		q = &leaderQueue{}
		if s.byLeader == nil {
			s.byLeader = map[int]*leaderQueue{}
		}
		s.byLeader[id] = q
	}
	return q
}

// produceShared sends msgs to partition in a request shared with the other
// partitions of its broker and returns the partition's outcome, as produce
// does for a request of its own.
func (s *sender) produceShared(deadline time.Time, partition int, msgs []message) error {
	q := s.leaderQueue(partition)
	if q == nil {
		return s.produce(deadline, partition, msgs)
	}
	pp := &partProduce{partition: partition, msgs: msgs, deadline: deadline, done: make(chan struct{}, 1)}
	q.mu.Lock()
	if q.busy {
		q.pending = append(q.pending, pp)
		q.mu.Unlock()
		<-pp.done
	} else {
		q.busy = true
		q.mu.Unlock()
		pp.lead = []*partProduce{pp}
	}
	if pp.lead != nil {
		s.request(pp.lead)
		for _, o := range pp.lead[1:] {
			o.done <- struct{}{}
		}
		q.mu.Lock()
		next := q.pending
		q.pending = nil
		q.busy = len(next) > 0
		q.mu.Unlock()
		if len(next) > 0 { // the first waiting partition sends the next request
			next[0].lead = next
			next[0].done <- struct{}{}
		}
	}
	if errors.Is(pp.err, errRegroup) {
		return s.produce(deadline, partition, msgs)
	}
	return pp.err
}

// produce sends msgs to partition in a request of its own and returns the
// request's error, the partition's error in the response, or its first
// record error.
func (s *sender) produce(deadline time.Time, partition int, msgs []message) error {
	pp := &partProduce{partition: partition, msgs: msgs, deadline: deadline}
	s.request([]*partProduce{pp})
	return pp.err
}

// request sends one acks=all produce request carrying every batch of list,
// bounded by the earliest deadline, and sets each one's err (partitionErrors).
// When the request fails as a whole, a lone batch gets that error and the
// batches of a shared one get it wrapped in errRegroup.
func (s *sender) request(list []*partProduce) {
	deadline, jobs := list[0].deadline, 0
	parts := make([]produceAPI.RequestPartition, len(list))
	for i, pp := range list {
		deadline = minTime(deadline, pp.deadline)
		jobs += len(pp.msgs)
		parts[i] = produceAPI.RequestPartition{Partition: int32(pp.partition),
			RecordSet: protocol.RecordSet{Records: &recordReader{msgs: pp.msgs}}}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	s.requests.Add(1)
	s.messages.Add(int64(jobs))
	s.batchJobs.Observe(float64(jobs))
	res, err := s.transport.RoundTrip(ctx, s.client.Addr, &produceAPI.Request{
		Acks:    int16(kafka.RequireAll),
		Timeout: int32(max(time.Until(deadline)/2, time.Millisecond) / time.Millisecond),
		Topics:  []produceAPI.RequestTopic{{Topic: s.topic, Partitions: parts}},
	})
	if err == nil {
		err = s.partitionErrors(res, list)
	}
	if err != nil {
		if len(list) > 1 {
			err = fmt.Errorf("%w (%w)", errRegroup, err)
		}
		for _, pp := range list {
			pp.err = err
		}
	}
}

// partitionErrors sets each batch's err from the response: the partition's
// error code, its first record error, or its absence from the response
// (protocol.ErrNoPartition, which send retries; errRegroup too in a shared
// request). It returns an error when the response is not a produce response
// of the topic.
func (s *sender) partitionErrors(res protocol.Message, list []*partProduce) error {
	r, ok := res.(*produceAPI.Response)
	if !ok || len(r.Topics) != 1 || r.Topics[0].Topic != s.topic {
		return fmt.Errorf("kafka: produce response of %T does not answer topic %s", res, s.topic)
	}
	got := make(map[int32]*produceAPI.ResponsePartition, len(r.Topics[0].Partitions))
	for i := range r.Topics[0].Partitions {
		p := &r.Topics[0].Partitions[i]
		got[p.Partition] = p
	}
	for _, pp := range list {
		p := got[int32(pp.partition)]
		switch {
		case p == nil && len(list) > 1:
			pp.err = fmt.Errorf("%w: %w: the response has no partition %d", errRegroup, protocol.ErrNoPartition, pp.partition)
		case p == nil:
			pp.err = fmt.Errorf("%w: the response has no partition %d", protocol.ErrNoPartition, pp.partition)
		case p.ErrorCode != 0 && p.ErrorMessage != "":
			pp.err = fmt.Errorf("%w: %s", kafka.Error(p.ErrorCode), p.ErrorMessage)
		case p.ErrorCode != 0:
			pp.err = kafka.Error(p.ErrorCode)
		case len(p.RecordErrors) > 0:
			pp.err = fmt.Errorf("kafka: record %d: %s", p.RecordErrors[0].BatchIndex, p.RecordErrors[0].BatchIndexErrorMessage)
		}
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
