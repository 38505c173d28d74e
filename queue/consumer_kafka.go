package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
)

// Defaults of KafkaConsumerConfig.
const (
	DefaultKafkaMaxPartitionJobs = 10_000
	DefaultKafkaMaxTenantJobs    = 1_000
	DefaultKafkaMaxWindow        = 1 << 24
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
	// kafkaBacklogTimeout bounds the backlog counter write of a Finish.
	kafkaBacklogTimeout = time.Second
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
	// partition stops taking fetched jobs (the rest of a fetch is fetched
	// again later) and stops fetching until it holds fewer than half.
	MaxPartitionJobs int
	// MaxTenantJobs bounds one tenant's jobs in memory per partition
	// (default 1,000). Beyond it the tenant's later jobs are left in Kafka
	// while the partition goes on for the other tenants; they are read
	// again once the tenant holds fewer than half.
	MaxTenantJobs int
	// MaxWindow bounds the offsets between a partition's commit watermark
	// (its lowest unfinished job) and its read position (default 2^24,
	// whose finished-offset bitmap takes 2 MiB). At the bound the partition
	// stops fetching until the window is below half.
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

// NewKafkaConsumer checks cfg, creates the DLQ topic when absent and
// returns a consumer; deps.Redis holds the backlog counters and cancel
// markers (nil skips both). It joins the group
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
