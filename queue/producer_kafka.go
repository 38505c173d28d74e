package queue

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

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// Defaults and limits of the Kafka producer.
const (
	// DefaultKafkaProduceTimeout bounds one Enqueue call when
	// config.Kafka.ProduceTimeout is zero.
	DefaultKafkaProduceTimeout = 2 * time.Second
	// kafkaMaxRequestBytes caps the records of one produce request, below
	// the broker's default message.max.bytes (1 MiB + 12). A larger job is
	// refused with ErrInvalidJob.
	kafkaMaxRequestBytes = 1000 * 1000
	// kafkaBackoffMin and kafkaBackoffMax shape the pause between two tries
	// of one batch: attempt² × 20ms, at most 250ms, retried until the
	// produce timeout, enough to ride out a leader move.
	kafkaBackoffMin = 20 * time.Millisecond
	kafkaBackoffMax = 250 * time.Millisecond
	// kafkaMetadataTTL is how often the transport refreshes the topic's
	// metadata (partition leaders) in the background; a stale leader heals
	// within it.
	kafkaMetadataTTL = time.Second
	// kafkaPartitionsTTL is how long the partition count is trusted before
	// it is read again from the transport's metadata cache.
	kafkaPartitionsTTL = 10 * time.Second
	// backlogTimeout bounds the backlog counter write after Kafka's ack.
	backlogTimeout = time.Second
)

// Message headers set on every job, so a consumer can route or log a job
// without decoding its envelope.
const (
	HeaderJobID  = "sluice-job-id"
	HeaderTenant = "sluice-tenant"
)

// KafkaProducer queues jobs on one Kafka topic, keyed by tenant, with
// acks=all: Enqueue returns nil only after every in-sync replica of each
// job's partition has acknowledged it.
//
// Partitioning: the key is the tenant and the partition is
// (murmur2(tenant) & 0x7fffffff) mod partitions, the Java client's default
// partitioner (kafka.Murmur2Balancer), so every job of a tenant lands on one
// partition, in order, and a Java or librdkafka (murmur2) producer agrees.
//
// Batching: concurrent Enqueue calls share produce requests. Each
// partition has at most one request in flight; the jobs that arrive
// meanwhile leave together in the next one (group commit). A partition
// whose last request carried one call's jobs only sends the next job at
// once (latency: one acks=all round trip); one whose last request was
// shared first waits config.Kafka.BatchTimeout (default 2ms) for more jobs,
// so under load fewer, larger requests reach the broker. No call waits for
// a timer when it has no company.
//
// Backlog: after each acknowledged produce request, the backlog counters
// (keys.Backlog) of its jobs' tenants are raised by their cost in one
// pipelined round trip, and Enqueue returns once its jobs are counted (or,
// when ctx ends first, as soon as they are acknowledged). The jobs are
// already durable then, so a Redis failure there does not fail Enqueue: it
// is logged and counted in
// sluice_redis_errors_total{op="backlog_incr"}, and the counter is low by
// that cost until it expires (keys.BacklogTTL). The same pipeline records
// each job's state "queued" with its tenant's next seq (package jobstate;
// sluice_redis_errors_total{op="job_state_queued"} counts failures).
//
// A KafkaProducer is safe for concurrent use.
type KafkaProducer struct {
	sender    *kafkaSender
	transport *kafka.Transport
	topic     string
	timeout   time.Duration
	log       *slog.Logger
	m         *producerMetrics
	now       func() time.Time

	partMu      sync.Mutex
	partitions  atomic.Pointer[[]int] // 0..n-1, what the balancer takes
	partsExpire atomic.Int64          // unix ns after which partitions is read again
}

// NewKafkaProducer creates cfg.Topic with cfg.Partitions and
// cfg.ReplicationFactor when it is absent, waits until every partition has a
// leader, and returns a producer writing to it. deps.Redis, when set,
// receives the backlog counters. Start-up errors reaching the brokers wrap
// ErrUnavailable; the wait is bounded by ctx.
func NewKafkaProducer(ctx context.Context, cfg config.Kafka, deps ProducerDeps) (*KafkaProducer, error) {
	if len(cfg.Brokers) == 0 || cfg.Topic == "" {
		return nil, fmt.Errorf("queue: kafka producer: brokers and topic are required")
	}
	if cfg.Partitions < 1 || cfg.ReplicationFactor < 1 {
		return nil, fmt.Errorf("queue: kafka producer: partitions (%d) and replication_factor (%d) must be >= 1", cfg.Partitions, cfg.ReplicationFactor)
	}
	timeout := cfg.ProduceTimeout
	if timeout <= 0 {
		timeout = DefaultKafkaProduceTimeout
	}
	log := deps.logger()
	m, err := newProducerMetrics(deps.Registerer, "kafka")
	if err != nil {
		return nil, err
	}
	redisErrs, err := newRedisErrors(deps.Registerer, "backlog_incr")
	if err != nil {
		return nil, err
	}
	stateErrs, err := newRedisErrors(deps.Registerer, "job_state_queued")
	if err != nil {
		return nil, err
	}
	batchJobs, err := registerCollector(deps.Registerer, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_kafka_produce_batch_jobs",
		Help:    "Jobs per Kafka produce request (concurrent Enqueue calls share requests).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. 1024
	}))
	if err != nil {
		return nil, err
	}
	transport := &kafka.Transport{
		DialTimeout:    min(time.Second, timeout),
		MetadataTTL:    kafkaMetadataTTL,
		MetadataTopics: []string{cfg.Topic},
		ClientID:       "sluice-producer",
	}
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: transport, Timeout: timeout}
	if err := EnsureTopic(ctx, client, cfg.Topic, cfg.Partitions, cfg.ReplicationFactor, log); err != nil {
		transport.CloseIdleConnections()
		return nil, err
	}
	var backlog *kafkaBacklog
	if deps.Redis != nil {
		backlog = &kafkaBacklog{rdb: deps.Redis, log: log, errs: redisErrs, stateErrs: stateErrs, topic: cfg.Topic}
	}
	p := &KafkaProducer{
		sender: &kafkaSender{
			backlog: backlog,
			client:  client, topic: cfg.Topic, timeout: timeout, linger: cfg.BatchTimeout,
			maxBytes: kafkaMaxRequestBytes, backoffMin: kafkaBackoffMin, backoffMax: kafkaBackoffMax,
			batchJobs: batchJobs, lanes: map[int]*kafkaLane{},
		},
		transport: transport, topic: cfg.Topic, timeout: timeout,
		log: log, m: m, now: time.Now,
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
// did not acknowledge within ctx and the produce timeout (default 2s), or
// cannot be reached, the error wraps ErrUnavailable and the cause. Jobs of
// a failed call that were not sent yet are not sent at all; those already
// sent may still reach the topic, so a client retrying after the 503 may
// create a duplicate, which the sink dedupes by job id. Invalid jobs give an
// error wrapping ErrInvalidJob and nothing is written.
func (p *KafkaProducer) Enqueue(ctx context.Context, jobs []Envelope) (err error) {
	if len(jobs) == 0 {
		return nil
	}
	start := time.Now()
	defer func() { p.m.observe(start, len(jobs), err) }()
	batches, err := prepareJobs(jobs, p.now())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	parts, err := p.partitionList(ctx)
	if err != nil {
		return wrapUnavailable("kafka produce to "+p.topic, err)
	}
	call := &kafkaCall{}
	lanes := make([][]laneMsg, len(batches))
	for i := range batches {
		b := &batches[i]
		key := []byte(b.tenant)
		lanes[i] = make([]laneMsg, len(b.values))
		for j, v := range b.values {
			m := laneMsg{call: call, cost: b.jobs[j].Cost, key: key, value: v, job: b.jobs[j], headers: []kafka.Header{
				{Key: HeaderJobID, Value: []byte(b.jobs[j].ID)},
				{Key: HeaderTenant, Value: key},
			}}
			if size := msgSize(&m); size > kafkaMaxRequestBytes {
				return fmt.Errorf("%w: job %s: %d bytes, more than a Kafka request takes (%d)", ErrInvalidJob, b.jobs[j].ID, size, kafkaMaxRequestBytes)
			}
			lanes[i][j] = m
		}
	}
	var waits []*produceBatch
	for _, msgs := range lanes {
		partition := kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: msgs[0].key}, parts...)
		joined, ok := p.sender.add(partition, msgs)
		if !ok {
			call.abandoned.Store(true)
			return wrapUnavailable("kafka produce to "+p.topic, errProducerClosed)
		}
		waits = append(waits, joined...)
	}
	for _, w := range waits {
		select {
		case <-w.done:
			if w.err != nil {
				call.abandoned.Store(true)
				return wrapUnavailable("kafka produce to "+p.topic, w.err)
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
			return wrapUnavailable("kafka produce to "+p.topic, cause)
		}
	}
	return nil
}

// errProducerClosed is the cause given to Enqueue calls after Close.
var errProducerClosed = errors.New("producer closed")

// partitionList returns [0, 1, ..., n-1] for the topic's n partitions, read
// from the transport's metadata cache at most every kafkaPartitionsTTL.
func (p *KafkaProducer) partitionList(ctx context.Context) ([]int, error) {
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
	list := make([]int, n)
	for i := range list {
		list[i] = i
	}
	p.partitions.Store(&list)
	p.partsExpire.Store(time.Now().Add(kafkaPartitionsTTL).UnixNano())
	return list, nil
}

// kafkaBacklog raises the tenants' backlog counters for the jobs of one
// acknowledged produce request, and records the jobs' state "queued".
type kafkaBacklog struct {
	rdb       redis.UniversalClient
	log       *slog.Logger
	errs      prometheus.Counter
	stateErrs prometheus.Counter
	topic     string
}

// add raises each tenant's backlog counter by the cost of its jobs in msgs
// and refreshes its TTL, and records each job as queued with the next seq of
// its tenant (jobstate.EnqueueCall), in one pipelined round trip per produce
// request (not per call), bounded by backlogTimeout. It counts every
// acknowledged job, also one whose caller gave up meanwhile. A failure is
// logged and counted, not returned: the jobs are durable.
func (k *kafkaBacklog) add(msgs []laneMsg) {
	cost := make(map[string]int64, 1)
	var order []string
	states := make(map[string][]jobstate.QueuedJob, 1)
	for i := range msgs {
		t := string(msgs[i].key)
		if _, ok := cost[t]; !ok {
			order = append(order, t)
		}
		cost[t] += msgs[i].cost
		if j := msgs[i].job; j != nil {
			states[t] = append(states[t], jobstate.QueuedJob{ID: j.ID, Type: j.Type, EnqueuedAt: j.EnqueuedAt})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	calls := make([]lua.Call, 0, len(states))
	for _, tenant := range order {
		if js := states[tenant]; len(js) > 0 {
			calls = append(calls, jobstate.EnqueueCall(tenant, js))
		}
	}
	incrs := make([]*redis.IntCmd, 0, len(order))
	stateCmds := lua.Exec(ctx, k.rdb, calls, func(pipe redis.Pipeliner) {
		for _, tenant := range order {
			key := keys.Backlog(tenant)
			incrs = append(incrs, pipe.IncrBy(ctx, key, cost[tenant]))
			pipe.PExpire(ctx, key, keys.BacklogTTL)
		}
	})
	for _, c := range incrs {
		if err := c.Err(); err != nil {
			k.errs.Inc()
			k.log.Error("backlog counter not raised after kafka ack; the jobs are queued",
				"topic", k.topic, "tenants", len(cost), "jobs", len(msgs), "err", err)
			break
		}
	}
	for i, c := range calls {
		if err := stateCmds[i].Err(); err != nil {
			k.stateErrs.Inc()
			k.log.Warn("job states not recorded after kafka ack; the jobs are queued",
				"topic", k.topic, "jobs", len(c.Keys)-2, "err", err)
		}
	}
}

// Close stops taking jobs (Enqueue then fails with ErrUnavailable), waits
// until the jobs already taken are acknowledged or failed (bounded by the
// produce timeout), and closes the connections. Call it after ingest
// stopped taking requests.
func (p *KafkaProducer) Close() error {
	p.sender.close()
	p.transport.CloseIdleConnections()
	return nil
}
