package queue

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// The Kafka consumer's scripts, loaded by NewKafkaConsumer.
var (
	backlogDecrScript = lua.MustLoad("backlog_decr.lua")
	cancelledScript   = lua.MustLoad("job_cancelled.lua")
)

// Defaults of KafkaConsumerConfig.
const (
	DefaultKafkaMaxPartitionJobs = 10_000
	DefaultKafkaMaxTenantJobs    = 1_000
	DefaultKafkaMaxWindow        = 1 << 20
	DefaultKafkaCommitInterval   = time.Second
	DefaultKafkaClaimWait        = 100 * time.Millisecond
	DefaultKafkaFetchMaxWait     = 500 * time.Millisecond
	DefaultKafkaFetchMaxBytes    = 1 << 20
	DefaultKafkaRevokeTimeout    = 5 * time.Second
	DefaultKafkaSessionTimeout   = 10 * time.Second
	DefaultKafkaHeartbeat        = time.Second
	DefaultKafkaRebalanceTimeout = 30 * time.Second
)

// Bounds of the consumer's own calls to the brokers.
const (
	// kafkaCallTimeout bounds a commit, a ListOffsets or an OffsetFetch.
	kafkaCallTimeout = 5 * time.Second
	// kafkaCloseTimeout bounds leaving the group at the end of Run, after
	// the generation's own wind-down (RevokeTimeout + a commit).
	kafkaCloseTimeout = 10 * time.Second
	// metaMaxLen is the longest commit metadata written, below the broker's
	// default offset.metadata.max.bytes (4096).
	metaMaxLen = 3000
	// dlqRetryAfter is how long a job whose dead letter could not be written
	// waits before it is handed out again (and dead-lettered again).
	dlqRetryAfter = time.Second
)

// KafkaConsumerConfig configures a KafkaConsumer. Zero values take the
// defaults named on each field.
type KafkaConsumerConfig struct {
	// Kafka is the kafka section: Brokers, Topic, ConsumerGroup, DLQTopic
	// (created when absent with Partitions and ReplicationFactor), and
	// ProduceTimeout bounding one dead-letter write (default 2s).
	Kafka config.Kafka
	// Tenants are always listed by Tenants (the configured tenants).
	Tenants []string
	// MaxPartitionJobs bounds the jobs one partition holds in memory
	// (queued, deferred and claimed; default 10,000). At the bound the
	// partition stops fetching until it holds fewer than half; one fetch
	// (FetchMaxBytes) may overshoot it.
	MaxPartitionJobs int
	// MaxTenantJobs bounds one tenant's jobs in memory per partition
	// (default 1,000). Beyond it the tenant's later jobs are left in Kafka
	// while the partition goes on for the other tenants; they are read
	// again once the tenant holds fewer than half.
	MaxTenantJobs int
	// MaxWindow bounds the offsets between a partition's commit watermark
	// (its lowest unfinished job) and its read position (default 2^20). At
	// the bound the partition stops fetching until the window is below half.
	MaxWindow int64
	// CommitInterval is how often each partition's watermark is committed
	// (default 1s); it is also committed when the generation ends.
	CommitInterval time.Duration
	// ClaimWait is the longest Claim waits for a job of the tenant to
	// arrive before returning none (default 100ms).
	ClaimWait time.Duration
	// FetchMaxWait and FetchMaxBytes shape one fetch request (defaults
	// 500ms and 1 MiB).
	FetchMaxWait  time.Duration
	FetchMaxBytes int
	// RevokeTimeout bounds how long the end of a generation waits for the
	// jobs claimed from its partitions to be settled before it commits and
	// lets the partitions go (default 5s). Keep it well below
	// RebalanceTimeout.
	RevokeTimeout time.Duration
	// SessionTimeout, HeartbeatInterval and RebalanceTimeout are the
	// consumer group's (defaults 10s, 1s, 30s). A drainer that dies holds
	// its partitions for SessionTimeout; the broker refuses one below its
	// group.min.session.timeout.ms (6s by default).
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
}

func (c *KafkaConsumerConfig) defaults() error {
	k := &c.Kafka
	if len(k.Brokers) == 0 || k.Topic == "" || k.ConsumerGroup == "" || k.DLQTopic == "" {
		return errors.New("queue: kafka consumer: brokers, topic, consumer_group and dlq_topic are required")
	}
	if k.DLQTopic == k.Topic {
		return fmt.Errorf("queue: kafka consumer: dlq_topic %q must differ from topic", k.DLQTopic)
	}
	k.Partitions, k.ReplicationFactor = max(k.Partitions, 1), max(k.ReplicationFactor, 1)
	setDefault(&c.MaxPartitionJobs, DefaultKafkaMaxPartitionJobs)
	setDefault(&c.MaxTenantJobs, DefaultKafkaMaxTenantJobs)
	setDefault(&c.MaxWindow, DefaultKafkaMaxWindow)
	setDefault(&c.CommitInterval, DefaultKafkaCommitInterval)
	setDefault(&c.ClaimWait, DefaultKafkaClaimWait)
	setDefault(&c.FetchMaxWait, DefaultKafkaFetchMaxWait)
	setDefault(&c.FetchMaxBytes, DefaultKafkaFetchMaxBytes)
	setDefault(&c.RevokeTimeout, DefaultKafkaRevokeTimeout)
	setDefault(&c.SessionTimeout, DefaultKafkaSessionTimeout)
	setDefault(&c.HeartbeatInterval, DefaultKafkaHeartbeat)
	setDefault(&c.RebalanceTimeout, DefaultKafkaRebalanceTimeout)
	if c.MaxTenantJobs > c.MaxPartitionJobs {
		c.MaxTenantJobs = c.MaxPartitionJobs
	}
	return nil
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// KafkaConsumer drains the Kafka backend as one member of a consumer group
// (kafka-go ConsumerGroup). For each partition it owns it fetches the log in
// order and puts every job into the lane of its tenant in that partition,
// an in-memory FIFO; Claim(tenant) takes from the tenant's lanes, so a
// tenant that is throttled, slow or backlogged never holds up the tenants
// behind it on its partition.
//
// Commits: a partition's offset is committed only up to its watermark, the
// lowest offset whose job is not finished (delivered, dropped or
// dead-lettered), every CommitInterval and when the generation ends; the
// finished offsets above the watermark go into the commit's metadata, so a
// restart or a rebalance delivers again only the unfinished jobs (and those
// finished after the last commit): at least once, with few duplicates.
//
// Bounds (per partition): MaxTenantJobs jobs of one tenant in memory, beyond
// which that tenant's later jobs stay in Kafka and are read again when its
// lane drains; MaxPartitionJobs jobs in memory and MaxWindow offsets between
// the watermark and the read position, at which the partition pauses.
// docs/adr/0005-kafka-lanes.md says why.
//
// Run drives the group; Claim, Extend, Finish, Defer, Release and Tenants
// (queue.Consumer) are safe for concurrent use while it runs.
type KafkaConsumer struct {
	cfg       KafkaConsumerConfig
	client    *kafka.Client
	transport *kafka.Transport
	dlq       *kafkaDLQ
	rdb       redis.UniversalClient
	log       *slog.Logger
	m         *consumerMetrics
	prefix    string        // unique per consumer, part of every claim token
	seq       atomic.Uint64 // claim token counter
	running   atomic.Bool

	mu      sync.Mutex
	tenants map[string]*tenantQueue
	claimed map[*Claimed]*entry
	settled chan struct{} // cap 1; signalled when a claimed job is settled
}

// NewKafkaConsumer checks cfg, creates the DLQ topic when absent, loads the
// consumer's scripts into deps.Redis (which holds the backlog counters and
// cancel markers; nil skips both) and returns a consumer. It joins the group
// only when Run is called. Errors reaching Kafka or Redis wrap
// ErrUnavailable.
func NewKafkaConsumer(ctx context.Context, cfg KafkaConsumerConfig, deps ProducerDeps) (*KafkaConsumer, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	m, err := newConsumerMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	if deps.Redis != nil {
		for _, s := range []*lua.Script{backlogDecrScript, cancelledScript} {
			if err := s.Load(ctx, deps.Redis); err != nil {
				return nil, fmt.Errorf("queue: kafka consumer: %w: %w", ErrUnavailable, err)
			}
		}
	}
	transport := &kafka.Transport{
		DialTimeout: time.Second, MetadataTTL: kafkaMetadataTTL,
		MetadataTopics: []string{cfg.Kafka.Topic, cfg.Kafka.DLQTopic}, ClientID: "sluice-drainer",
	}
	client := &kafka.Client{Addr: kafka.TCP(cfg.Kafka.Brokers...), Transport: transport, Timeout: kafkaCallTimeout}
	dlq, err := newKafkaDLQ(ctx, client, cfg.Kafka)
	if err != nil {
		transport.CloseIdleConnections()
		return nil, err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &KafkaConsumer{
		cfg: cfg, client: client, transport: transport, dlq: dlq, rdb: deps.Redis,
		log: deps.logger(), m: m, prefix: hex.EncodeToString(b),
		tenants: map[string]*tenantQueue{}, claimed: map[*Claimed]*entry{},
		settled: make(chan struct{}, 1),
	}, nil
}

// Run joins the consumer group and consumes every partition assigned to
// this member until ctx is done. Call it once. Shut down in this order:
// stop the drainer first (its in-flight jobs finish or are released), then
// cancel ctx. Run then ends the generation (drops unclaimed jobs, waits up
// to RevokeTimeout for claimed ones, commits), leaves the group so the other
// members take the partitions at once, and returns; nil after a clean
// shutdown.
func (c *KafkaConsumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("queue: kafka consumer: Run called twice")
	}
	defer c.transport.CloseIdleConnections()
	k := c.cfg.Kafka
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: k.ConsumerGroup, Brokers: k.Brokers, Topics: []string{k.Topic},
		StartOffset:       kafka.FirstOffset,
		HeartbeatInterval: c.cfg.HeartbeatInterval, SessionTimeout: c.cfg.SessionTimeout,
		RebalanceTimeout: c.cfg.RebalanceTimeout, JoinGroupBackoff: time.Second,
		WatchPartitionChanges: true,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			c.log.Debug("kafka consumer group: " + fmt.Sprintf(msg, args...))
		}),
	})
	if err != nil {
		return fmt.Errorf("queue: kafka consumer group %s: %w", k.ConsumerGroup, err)
	}
	var gens sync.WaitGroup
	for {
		gen, err := group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			c.m.errors.WithLabelValues("join").Inc()
			c.log.Warn("kafka consumer: join group; retrying", "group", k.ConsumerGroup, "err", err)
			continue // the group retries after its JoinGroupBackoff
		}
		gens.Add(1)
		gen.Start(func(genCtx context.Context) {
			defer gens.Done()
			c.runGeneration(genCtx, gen)
		})
	}
	// Closing the group ends the generation (whose partitions commit and
	// are let go) and then leaves the group. kafka-go may hang in close
	// (research/kafka.md), so it is bounded.
	closed := make(chan struct{})
	go func() { group.Close(); gens.Wait(); close(closed) }()
	select {
	case <-closed:
		return nil
	case <-time.After(c.cfg.RevokeTimeout + kafkaCallTimeout + kafkaCloseTimeout):
		return fmt.Errorf("queue: kafka consumer: leaving group %s did not finish in time", k.ConsumerGroup)
	}
}

// Tenants returns the configured tenants plus every tenant with jobs in
// this consumer's lanes, sorted.
func (c *KafkaConsumer) Tenants(ctx context.Context) ([]string, error) {
	seen := make(map[string]bool, len(c.cfg.Tenants))
	for _, t := range c.cfg.Tenants {
		seen[t] = true
	}
	c.mu.Lock()
	for t, tq := range c.tenants {
		if len(tq.lanes) > 0 || len(tq.deferred) > 0 {
			seen[t] = true
		}
	}
	c.mu.Unlock()
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

// Claim takes tenant's next job: a deferred retry that is due, else the
// head of its lanes, round robin across partitions. When there is none it
// waits up to ClaimWait for one to arrive (or a retry to fall due) and then
// returns nil with a zero wait, so the caller may ask again at once. The
// cancel marker (keys.JobState) is read from Redis; when Redis fails the
// job is handed out as not cancelled.
func (c *KafkaConsumer) Claim(ctx context.Context, tenant string) (*Claimed, time.Duration, error) {
	deadline := time.Now().Add(c.cfg.ClaimWait)
	for {
		now := time.Now()
		c.mu.Lock()
		tq := c.tenantLocked(tenant)
		e, due := popLocked(tq, now)
		if e != nil {
			e.lane.p.claimed++
			c.mu.Unlock()
			job := c.newClaimed(ctx, e, tenant)
			c.mu.Lock()
			c.claimed[job] = e
			c.mu.Unlock()
			return job, 0, nil
		}
		wake := tq.wake
		c.mu.Unlock()
		wait := deadline.Sub(now)
		if !due.IsZero() {
			wait = min(wait, due.Sub(now))
		}
		if wait <= 0 {
			if !due.IsZero() && !due.After(now) {
				continue
			}
			return nil, 0, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, nil
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// newClaimed decodes e into a claimed job of tenant. A job that does not
// decode, or belongs to another tenant, is poison: DecodeErr is set and
// the envelope holds the id from the message header (or the job's place in
// the log), the tenant and cost 1.
func (c *KafkaConsumer) newClaimed(ctx context.Context, e *entry, tenant string) *Claimed {
	job := &Claimed{Raw: e.raw}
	env, derr := Decode(e.raw)
	if derr == nil && env.Tenant != tenant {
		derr = fmt.Errorf("queue: job %s of tenant %q found in the lane of %q", env.ID, env.Tenant, tenant)
	}
	if derr != nil {
		id := e.jobID
		if id == "" {
			id = sourceOf(c.cfg.Kafka.Topic, e.lane.p.id, e.offset)
		}
		job.DecodeErr = derr
		env = Envelope{Version: EnvelopeVersion, ID: id, Tenant: tenant, Cost: 1}
	}
	if env.Cost < 1 {
		env.Cost = 1
	}
	job.Envelope = env
	job.member = env.ID + "|" + c.prefix + "." + strconv.FormatUint(c.seq.Add(1), 36)
	if derr == nil && c.rdb != nil {
		n, err := cancelledScript.Run(ctx, c.rdb, []string{keys.JobState(tenant, env.ID)}).Int64()
		if err != nil {
			c.m.redisErrs.WithLabelValues("cancel_check").Inc()
		}
		job.Cancelled = n == 1
	}
	return job
}

// Extend keeps nothing alive (Kafka holds no lease): it returns the jobs
// whose partition this consumer no longer owns (revoked in a rebalance),
// which the partition's new owner delivers again.
func (c *KafkaConsumer) Extend(ctx context.Context, tenant string, jobs []*Claimed) ([]*Claimed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lost []*Claimed
	for _, j := range jobs {
		if e, ok := c.claimed[j]; !ok || e.lane.p.state == partRevoked {
			lost = append(lost, j)
		}
	}
	return lost, nil
}

// takeLocked removes job from the claimed set and returns its entry, or nil
// when the job is not held (settled already, or not from this consumer).
func (c *KafkaConsumer) takeLocked(job *Claimed) *entry {
	e, ok := c.claimed[job]
	if !ok {
		return nil
	}
	delete(c.claimed, job)
	e.lane.p.claimed--
	signal(c.settled)
	return e
}

// Finish ends a job: for a dead one it first writes the dead-letter record
// to the DLQ topic (acks=all; when that fails the job is handed out again
// after a second and the error wraps ErrUnavailable), then lowers the
// tenant's backlog by the job's cost (lua/backlog_decr.lua; a Redis failure
// is logged and counted, not returned: the job is done), then marks its
// offset finished so the watermark can pass it. It returns ErrLeaseLost
// when the job's partition was revoked meanwhile: its new owner delivers it
// again.
func (c *KafkaConsumer) Finish(ctx context.Context, job *Claimed, dead *DeadLetter) error {
	c.mu.Lock()
	e, ok := c.claimed[job]
	if !ok || e.lane.p.state == partRevoked {
		c.takeLocked(job)
		c.mu.Unlock()
		return fmt.Errorf("queue: finish %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	c.mu.Unlock()
	if dead != nil {
		if err := c.dlq.write(ctx, job, dead, sourceOf(c.cfg.Kafka.Topic, e.lane.p.id, e.offset)); err != nil {
			c.m.errors.WithLabelValues("dlq").Inc()
			c.mu.Lock()
			if c.takeLocked(job) != nil && e.lane.p.state == partActive {
				e.due = time.Now().Add(dlqRetryAfter)
				heap.Push(&e.lane.tq.deferred, e)
				signal(e.lane.tq.wake)
			}
			c.mu.Unlock()
			return fmt.Errorf("queue: finish %s: dead letter: %w", job.Envelope.ID, err)
		}
	}
	c.lowerBacklog(ctx, job)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.takeLocked(job) == nil || e.lane.p.state == partRevoked {
		return fmt.Errorf("queue: finish %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	c.finishLocked(e)
	return nil
}

// finishLocked marks e's offset finished and lets it leave memory.
func (c *KafkaConsumer) finishLocked(e *entry) {
	p, ln := e.lane.p, e.lane
	p.win.finish(e.offset)
	ln.held--
	p.held--
	c.releasedLocked(p, ln)
}

// lowerBacklog lowers the tenant's backlog counter by the job's cost. It
// outlives ctx's cancellation (the job is done either way), bounded by
// backlogTimeout.
func (c *KafkaConsumer) lowerBacklog(ctx context.Context, job *Claimed) {
	if c.rdb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backlogTimeout)
	defer cancel()
	t := job.Envelope.Tenant
	err := backlogDecrScript.Run(ctx, c.rdb, []string{keys.Backlog(t)}, job.Envelope.Cost, keys.BacklogTTL.Milliseconds()).Err()
	if err != nil {
		c.m.redisErrs.WithLabelValues("backlog_decr").Inc()
		c.log.Error("kafka consumer: backlog counter not lowered; the job is finished",
			"tenant", t, "job_id", job.Envelope.ID, "err", err)
	}
}

// Defer holds the job in memory for delay and then hands it out again as
// next (its offset stays unfinished meanwhile, so a crash delivers it
// again). It returns ErrLeaseLost when the job's partition is being let go.
func (c *KafkaConsumer) Defer(ctx context.Context, job *Claimed, delay time.Duration, next Envelope) error {
	raw, err := next.Encode()
	if err != nil {
		return fmt.Errorf("queue: defer %s: %w", job.Envelope.ID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.takeLocked(job)
	if e == nil || e.lane.p.state != partActive {
		return fmt.Errorf("queue: defer %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	e.raw, e.due = raw, time.Now().Add(max(delay, 0))
	heap.Push(&e.lane.tq.deferred, e)
	signal(e.lane.tq.wake)
	return nil
}

// Release puts the job back at the head of its lane, unchanged. It returns
// ErrLeaseLost when the job's partition is being let go.
func (c *KafkaConsumer) Release(ctx context.Context, job *Claimed) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.takeLocked(job)
	if e == nil || e.lane.p.state != partActive {
		return fmt.Errorf("queue: release %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	e.lane.q.pushFront(e)
	signal(e.lane.tq.wake)
	return nil
}

// consumerMetrics are the Kafka consumer's series.
type consumerMetrics struct {
	lag       *prometheus.GaugeVec   // topic, partition
	laneJobs  *prometheus.GaugeVec   // topic, partition
	paused    *prometheus.GaugeVec   // topic, partition
	errors    *prometheus.CounterVec // op
	redisErrs *prometheus.CounterVec // op
	overflows prometheus.Counter
}

// newConsumerMetrics registers (or finds) the consumer's metrics:
//
//	sluice_consumer_lag{topic,partition}            high watermark − commit watermark
//	sluice_lane_jobs{topic,partition}               jobs held in memory
//	sluice_kafka_partition_paused{topic,partition}  1 while at a bound
//	sluice_kafka_errors_total{op}                   fetch, commit, list_offsets, offset_fetch, join, dlq
//	sluice_kafka_lane_overflows_total               times a tenant's lane reached MaxTenantJobs
//	sluice_redis_errors_total{op}                   backlog_decr, cancel_check
func newConsumerMetrics(reg prometheus.Registerer) (*consumerMetrics, error) {
	var m consumerMetrics
	var err error
	gauge := func(name, help string) *prometheus.GaugeVec {
		if err != nil {
			return nil
		}
		var g *prometheus.GaugeVec
		g, err = registerCollector(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"topic", "partition"}))
		return g
	}
	m.lag = gauge("sluice_consumer_lag", "Jobs of the partition not yet finished: high watermark minus the commit watermark (lowest unfinished offset).")
	m.laneJobs = gauge("sluice_lane_jobs", "Jobs of the partition held in this drainer's memory (queued in lanes, deferred, claimed).")
	m.paused = gauge("sluice_kafka_partition_paused", "1 while the partition stops fetching at its memory or window bound.")
	if err != nil {
		return nil, err
	}
	if m.errors, err = registerCollector(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_kafka_errors_total", Help: "Kafka calls of the consumer that failed, by operation.",
	}, []string{"op"})); err != nil {
		return nil, err
	}
	if m.redisErrs, err = registerCollector(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_redis_errors_total", Help: "Redis commands that failed, by operation.",
	}, []string{"op"})); err != nil {
		return nil, err
	}
	if m.overflows, err = registerCollector(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_kafka_lane_overflows_total", Help: "Times a tenant's lane in a partition reached its bound; its later jobs were left in Kafka to be read again.",
	})); err != nil {
		return nil, err
	}
	return &m, nil
}

// forget deletes a partition's series when this consumer lets it go, so the
// partition's new owner is the only one reporting it.
func (m *consumerMetrics) forget(topic string, partition int) {
	p := strconv.Itoa(partition)
	m.lag.DeleteLabelValues(topic, p)
	m.laneJobs.DeleteLabelValues(topic, p)
	m.paused.DeleteLabelValues(topic, p)
}
