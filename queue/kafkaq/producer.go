// Package kafkaq is sluice's Kafka queue backend: one topic holding every
// job keyed by tenant, its Producer (ingest) and its Consumer (drainer, a
// consumer-group member that splits each partition into per-tenant FIFOs).
// Redis holds the tenants' backlog counters, cancel markers and job states.
package kafkaq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/internal/batch"
	"github.com/sluicehq/sluice/queue/internal/metrics"
)

// Limits of the Kafka producer.
const (
	// maxRequestBytes caps the records of one produce request, below the
	// broker's default message.max.bytes (1 MiB + 12). A larger job is
	// refused with queue.ErrInvalidJob.
	maxRequestBytes = 1000 * 1000
	// backoffMin and backoffMax shape the pause between two tries of one
	// batch: attempt² × 20ms, at most 250ms, retried until the produce
	// timeout, enough to ride out a leader move.
	backoffMin = 20 * time.Millisecond
	backoffMax = 250 * time.Millisecond
	// metadataTTL is how often the transport refreshes the topic's
	// metadata (partition leaders) in the background; a stale leader heals
	// within it.
	metadataTTL = time.Second
	// partitionsTTL is how long the partition count is trusted before it is
	// read again from the transport's metadata cache.
	partitionsTTL = 10 * time.Second
	// backlogTimeout bounds a backlog counter write: after Kafka's ack, and
	// in a Finish.
	backlogTimeout = time.Second
)

// Message headers set on every job, so a consumer can route or log a job
// without decoding its envelope.
const (
	HeaderJobID  = "sluice-job-id"
	HeaderTenant = "sluice-tenant"
)

// ProducerConfig configures a Producer. Every zero field takes its default.
type ProducerConfig struct {
	// Kafka is the cluster and topic (Brokers, Topic, Partitions,
	// ReplicationFactor and MinInsyncReplicas when the topic is created,
	// BatchTimeout, ProduceTimeout).
	Kafka Settings
	// Redis receives the backlog counters and job states; nil disables
	// both.
	Redis redis.UniversalClient
	// Logger receives the errors that are not returned (a backlog counter
	// that could not be written after Kafka acknowledged). Nil is
	// slog.Default().
	Logger *slog.Logger
	// Registerer receives the producer's metrics. Nil registers nothing.
	Registerer prometheus.Registerer
	// Clock gives a job's enqueued_at when the caller left it zero (default
	// clock.Real).
	Clock clock.Clock
}

// Producer queues jobs on one Kafka topic, keyed by tenant, with acks=all:
// Enqueue returns nil only after every in-sync replica of each job's
// partition has acknowledged it.
//
// Partitioning: the key is the tenant and the partition is
// (murmur2(tenant) & 0x7fffffff) mod partitions, the Java client's default
// partitioner (kafka.Murmur2Balancer), so every job of a tenant lands on one
// partition, in order, and a Java or librdkafka (murmur2) producer agrees.
//
// Batching: concurrent Enqueue calls share produce requests. Each
// partition has at most one request in flight; the jobs that arrive
// meanwhile leave together in the next one (group commit; sender.go). A
// partition whose last request carried one call's jobs only sends the next
// job at once (latency: one acks=all round trip); one whose last request
// was shared first waits Settings.BatchTimeout for more jobs, so under load
// fewer, larger requests reach the broker. No call waits for a timer when
// it has no company. The partitions led by one broker share its requests:
// one request at a time per broker carries a batch of each partition that
// has one (leader.go), as the Java client's requests do.
//
// Backlog: after each acknowledged produce request, the backlog counters
// (keys.Backlog) of its jobs' tenants are raised by their cost in one
// pipelined round trip, and Enqueue returns once its jobs are counted (or,
// when ctx ends first, as soon as they are acknowledged). The jobs are
// already durable then, so a Redis failure there does not fail Enqueue: it
// is logged and counted in
// sluice_redis_errors_total{op="backlog_incr"}, and the count is held and
// written again every backlogRetry, so the counter is reconciled within
// about a second of Redis' return (held in this process only: lost if it
// stops first). The same pipeline records
// each job's state "queued" with its tenant's next seq (package jobstate;
// sluice_redis_errors_total{op="job_state_queued"} counts failures).
//
// A Producer is safe for concurrent use.
type Producer struct {
	sender    *sender
	transport *kafka.Transport
	topic     string
	timeout   time.Duration
	log       *slog.Logger
	m         *metrics.Producer
	clock     clock.Clock

	partMu      sync.Mutex
	partitions  atomic.Pointer[[]int] // 0..n-1, what the balancer takes
	partsExpire atomic.Int64          // unix ns after which partitions is read again
}

// NewProducer creates cfg.Kafka.Topic with its Partitions,
// ReplicationFactor and MinInsyncReplicas when it is absent (EnsureTopic), waits until every partition has a
// leader, and returns a producer writing to it. Start-up errors reaching
// the brokers wrap queue.ErrUnavailable; the wait is bounded by ctx.
func NewProducer(ctx context.Context, cfg ProducerConfig) (*Producer, error) {
	k, err := cfg.Kafka.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s, err := newSender(k, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	if cfg.Redis != nil {
		if s.backlog, err = newBacklog(cfg.Redis, log, cfg.Registerer, k.Topic); err != nil {
			return nil, err
		}
	}
	transport := s.transport
	p := &Producer{sender: s, transport: transport, topic: k.Topic, timeout: k.ProduceTimeout,
		log: log, clock: clock.Or(cfg.Clock)}
	if p.m, err = metrics.NewProducer(cfg.Registerer, "kafka"); err != nil {
		return nil, err
	}
	if err := EnsureTopic(ctx, s.client, k.topicSpec(k.Topic), log); err != nil {
		transport.CloseIdleConnections()
		return nil, err
	}
	if _, err := p.partitionList(ctx); err != nil {
		transport.CloseIdleConnections()
		return nil, err
	}
	return p, nil
}

// Enqueue produces every job to the topic (key = tenant, value = envelope
// JSON, headers sluice-job-id and sluice-tenant) and waits for acks=all. It
// returns nil only when the broker acknowledged every job. When the broker
// did not acknowledge within ctx and the produce timeout, or cannot be
// reached, the error wraps queue.ErrUnavailable and the cause. Jobs of a
// failed call that were not sent yet are not sent at all; those already
// sent may still reach the topic: then the error wraps
// queue.ErrUnknownOutcome too, and enqueueing the same envelopes again
// (same id and enqueued_at) delivers the job once (a drainer settles the
// copy of a job already done unsent). Invalid jobs give
// an error wrapping queue.ErrInvalidJob and nothing is written.
func (p *Producer) Enqueue(ctx context.Context, jobs []queue.Envelope) (err error) {
	if len(jobs) == 0 {
		return nil
	}
	start := time.Now()
	defer func() { p.m.Observe(start, len(jobs), err) }()
	batches, err := batch.Prepare(jobs, p.clock.Now())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	parts, err := p.partitionList(ctx)
	if err != nil {
		return queue.Unavailable("kafka produce to "+p.topic, err)
	}
	call := &producerCall{}
	perTenant, err := messagesOf(call, batches)
	if err != nil {
		return err
	}
	var waits []*produceBatch
	for _, msgs := range perTenant {
		partition := kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: msgs[0].key}, parts...)
		joined, ok := p.sender.add(partition, msgs)
		if !ok {
			call.abandoned.Store(true)
			return queue.Unavailable("kafka produce to "+p.topic, errProducerClosed)
		}
		waits = append(waits, joined...)
	}
	if sent, err := call.wait(ctx, waits); err != nil {
		if sent {
			return queue.UnknownOutcome("kafka produce to "+p.topic, err)
		}
		return queue.Unavailable("kafka produce to "+p.topic, err)
	}
	return nil
}

// messagesOf turns each tenant's batch into its messages for call, or
// returns an error wrapping queue.ErrInvalidJob for a job larger than a
// produce request takes.
func messagesOf(call *producerCall, batches []batch.Tenant) ([][]message, error) {
	out := make([][]message, len(batches))
	for i := range batches {
		b := &batches[i]
		key := []byte(b.Tenant)
		out[i] = make([]message, len(b.Values))
		for j, v := range b.Values {
			m := message{call: call, cost: b.Jobs[j].Cost, key: key, value: v, job: b.Jobs[j], headers: []kafka.Header{
				{Key: HeaderJobID, Value: []byte(b.Jobs[j].ID)},
				{Key: HeaderTenant, Value: key},
			}}
			if size := msgSize(&m); size > maxRequestBytes {
				return nil, fmt.Errorf("%w: job %s: %d bytes, more than a Kafka request takes (%d)", queue.ErrInvalidJob, b.Jobs[j].ID, size, maxRequestBytes)
			}
			out[i][j] = m
		}
	}
	return out, nil
}

// wait waits until every batch of the call is done, or ctx ends. It returns
// the first batch's error, or ctx's error (with the last try's) when a
// batch was not acknowledged in time; either way the call is abandoned, so
// its jobs not sent yet are left out. sent reports that a produce request
// of any batch of the call was sent or acknowledged (some of its jobs may
// be in the topic: the outcome is unknown); when it is false no request of
// the call left.
func (call *producerCall) wait(ctx context.Context, waits []*produceBatch) (sent bool, err error) {
	for _, w := range waits {
		select {
		case <-w.done:
			if w.err != nil {
				call.abandoned.Store(true)
				return anySent(waits), w.err
			}
		case <-ctx.Done():
			if w.acked.Load() {
				continue // durable; its backlog counter is being written
			}
			call.abandoned.Store(true)
			cause := ctx.Err()
			if last := w.lastErr.Load(); last != nil {
				cause = fmt.Errorf("%w (last try: %w)", cause, *last)
			}
			return anySent(waits), cause
		}
	}
	return false, nil
}

// anySent reports whether a produce request of any of waits was sent or
// acknowledged.
func anySent(waits []*produceBatch) bool {
	for _, w := range waits {
		if w.sent.Load() || w.acked.Load() {
			return true
		}
	}
	return false
}

// errProducerClosed is the cause given to Enqueue calls after Close.
var errProducerClosed = errors.New("producer closed")

// partitionList returns [0, 1, ..., n-1] for the topic's n partitions, read
// from the transport's metadata cache at most every partitionsTTL.
func (p *Producer) partitionList(ctx context.Context) ([]int, error) {
	cur := p.partitions.Load()
	if cur != nil && time.Now().UnixNano() < p.partsExpire.Load() {
		return *cur, nil
	}
	p.partMu.Lock()
	defer p.partMu.Unlock()
	if cur = p.partitions.Load(); cur != nil && time.Now().UnixNano() < p.partsExpire.Load() {
		return *cur, nil
	}
	md, err := p.sender.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{p.topic}})
	if err == nil && (len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) == 0) {
		err = fmt.Errorf("kafka: topic %s: no partitions in metadata (%+v)", p.topic, md.Topics)
	}
	if err != nil {
		if cur != nil {
			return *cur, nil // keep producing with the last known layout
		}
		return nil, err
	}
	n := len(md.Topics[0].Partitions)
	if cur != nil && len(*cur) != n {
		p.log.Info("kafka topic partition count changed; tenants may move to other partitions",
			"topic", p.topic, "partitions", n, "previous", len(*cur))
	}
	list, leaders := make([]int, n), make([]int, n)
	for i := range list {
		list[i], leaders[i] = i, -1
	}
	for _, part := range md.Topics[0].Partitions {
		if part.ID >= 0 && part.ID < n {
			leaders[part.ID] = part.Leader.ID
		}
	}
	p.sender.setLeaders(leaders)
	p.partitions.Store(&list)
	p.partsExpire.Store(time.Now().Add(partitionsTTL).UnixNano())
	return list, nil
}

// Close stops taking jobs (Enqueue then fails with queue.ErrUnavailable),
// waits until the jobs already taken are acknowledged or failed (bounded by
// the produce timeout), and closes the connections. Call it after ingest
// stopped taking requests.
func (p *Producer) Close() error {
	p.sender.close()
	if p.sender.backlog != nil {
		p.sender.backlog.close()
	}
	p.transport.CloseIdleConnections()
	return nil
}

// Check returns the error Enqueue would return for jobs before it sends
// anything (queue.Checker), wrapping queue.ErrInvalidJob for a job larger
// than a produce request takes; it writes nothing. Ingest checks scheduled
// jobs with it when it stores them, and the scheduler when they fall due.
func (p *Producer) Check(jobs []queue.Envelope) error {
	batches, err := batch.Prepare(jobs, p.clock.Now())
	if err != nil {
		return err
	}
	_, err = messagesOf(&producerCall{}, batches)
	return err
}
