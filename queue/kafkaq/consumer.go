package kafkaq

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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/quietlog"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// Defaults of ConsumerConfig.
const (
	DefaultMaxPartitionJobs = 10_000
	DefaultMaxTenantJobs    = 1_000
	DefaultMaxWindow        = 1 << 24
	DefaultCommitInterval   = time.Second
	DefaultClaimWait        = 100 * time.Millisecond
	DefaultFetchMaxWait     = 500 * time.Millisecond
	DefaultFetchMaxBytes    = 1 << 20
	DefaultRevokeTimeout    = 5 * time.Second
	DefaultSessionTimeout   = 6 * time.Second
	DefaultHeartbeat        = time.Second
	DefaultRebalanceTimeout = 30 * time.Second
	// DefaultLease is ConsumerConfig.Lease's default, the drainer's
	// (config.DefaultLease).
	DefaultLease = 30 * time.Second
)

// Bounds of the consumer's own calls to the brokers.
const (
	// callTimeout bounds a commit, a ListOffsets or an OffsetFetch.
	callTimeout = 5 * time.Second
	// closeTimeout bounds leaving the group at the end of Run, after
	// the generation's own wind-down (RevokeTimeout + a commit).
	closeTimeout = 10 * time.Second
	// metaMaxLen is the longest commit metadata written, below the broker's
	// default offset.metadata.max.bytes (4096).
	metaMaxLen = 3000
	// dlqRetryAfter is how long a job whose dead letter could not be written
	// waits before it is handed out again (and dead-lettered again).
	dlqRetryAfter = time.Second
)

// ConsumerConfig configures a Consumer. Zero values take the
// defaults named on each field.
type ConsumerConfig struct {
	// Kafka is the cluster and topics: Brokers, Topic, ConsumerGroup,
	// DLQTopic (created when absent with Partitions and ReplicationFactor),
	// and ProduceTimeout bounding one dead-letter write.
	Kafka Settings
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
	// ClaimWait is the longest Claim and Take wait for a job of the tenant
	// to arrive before returning none (default 100ms).
	ClaimWait time.Duration
	// Lease is how long a delivery Take starts counts as in flight
	// (keys.Delivering) unless the drainer extends it: the drainer's lease,
	// which it passes to its own starts (drainer.lease; internal/boot.Queue
	// sets it through queue/backend's Config.Lease). Default DefaultLease.
	Lease time.Duration
	// FetchMaxWait and FetchMaxBytes shape one fetch request (defaults
	// 500ms and 1 MiB).
	FetchMaxWait  time.Duration
	FetchMaxBytes int
	// RevokeTimeout bounds how long the end of a generation waits for the
	// jobs claimed from its partitions to be settled before it commits and
	// lets the partitions go (default Kafka.Group's, else 5s; the drainer's
	// start sets the longest delivery timeout + 1s, internal/boot.Queue).
	// RebalanceTimeout is raised to at least RevokeTimeout + 10s.
	RevokeTimeout time.Duration
	// SessionTimeout, HeartbeatInterval and RebalanceTimeout are the
	// consumer group's (defaults 6s, 1s, 30s). A drainer that dies holds
	// its partitions for SessionTimeout; the broker refuses one below its
	// group.min.session.timeout.ms (6s by default).
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration

	// Redis holds the backlog counters, cancel markers and job states; nil
	// skips all three.
	Redis redis.UniversalClient
	// Logger receives what the consumer does not return (a rebalance, a
	// failed fetch or commit). Nil is slog.Default().
	Logger *slog.Logger
	// Registerer receives the consumer's metrics. Nil registers nothing.
	Registerer prometheus.Registerer
	// Clock reads the time for deferred retries' due times and dead
	// letters' At (default clock.Real).
	Clock clock.Clock
}

func (c *ConsumerConfig) defaults() error {
	k, err := c.Kafka.withDefaults()
	if err != nil {
		return err
	}
	c.Kafka = k
	setDefault(&c.MaxPartitionJobs, DefaultMaxPartitionJobs)
	setDefault(&c.MaxTenantJobs, DefaultMaxTenantJobs)
	setDefault(&c.MaxWindow, DefaultMaxWindow)
	setDefault(&c.CommitInterval, DefaultCommitInterval)
	setDefault(&c.ClaimWait, DefaultClaimWait)
	setDefault(&c.Lease, DefaultLease)
	setDefault(&c.FetchMaxWait, DefaultFetchMaxWait)
	setDefault(&c.FetchMaxBytes, DefaultFetchMaxBytes)
	g := c.Kafka.Group
	setDefault(&c.RevokeTimeout, g.RevokeTimeout)
	setDefault(&c.SessionTimeout, g.SessionTimeout)
	setDefault(&c.HeartbeatInterval, g.HeartbeatInterval)
	setDefault(&c.RebalanceTimeout, g.RebalanceTimeout)
	setDefault(&c.RevokeTimeout, DefaultRevokeTimeout)
	setDefault(&c.SessionTimeout, DefaultSessionTimeout)
	setDefault(&c.HeartbeatInterval, DefaultHeartbeat)
	setDefault(&c.RebalanceTimeout, DefaultRebalanceTimeout)
	// The rebalance must outlast the revoke wait and its commit.
	c.RebalanceTimeout = max(c.RebalanceTimeout, c.RevokeTimeout+2*callTimeout)
	if c.MaxTenantJobs > c.MaxPartitionJobs {
		c.MaxTenantJobs = c.MaxPartitionJobs
	}
	return nil
}

// Consumer drains the Kafka backend as one member of a consumer group
// (kafka-go ConsumerGroup). For each partition it owns it fetches the log in
// order and puts every job into its tenant's FIFO for that partition (in
// memory); Claim(tenant) takes from the tenant's FIFOs, so a
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
// FIFO drains; MaxPartitionJobs jobs in memory and MaxWindow offsets between
// the watermark and the read position, at which the partition pauses.
// docs/adr/0005-kafka-lanes.md says why.
//
// Run drives the group; Claim, Take, Extend, Finish, Defer, Release and Tenants
// (queue.Consumer) are safe for concurrent use while it runs.
type Consumer struct {
	member    *memberRecord // nil without ConsumerConfig.Instance
	cfg       ConsumerConfig
	client    *kafka.Client
	transport *kafka.Transport
	dlq       *dlqWriter
	rdb       redis.UniversalClient
	log       *slog.Logger
	clock     clock.Clock
	m         *consumerMetrics
	prefix    string        // unique per consumer, part of every claim token
	seq       atomic.Uint64 // claim token counter
	running   atomic.Bool
	refresh   keys.Refresh                     // once a second per tenant: TTLs and the done trim
	finishes  *lua.Batcher[kafkaFinish, int64] // Finish's kafka_finish.lua calls, a tenant's merged, in shared pipelines

	mu        sync.Mutex
	tenants   map[string]*tenantQueue
	claimed   map[*queue.Claimed]*entry
	holding   map[string]*queue.Claimed // the claimed copy of each job (sameKey): holdLocked
	settled   chan struct{}             // cap 1; signalled when a claimed job is settled
	unwritten []heldFinish              // finishes whose Redis write failed, retried (heldfinish.go)

	quiet *quietlog.Log // Redis failures that repeat per job while Redis is down
}

// NewConsumer checks cfg, creates the DLQ topic when absent and returns a
// consumer. It joins the group only when Run is called. Errors reaching
// Kafka wrap queue.ErrUnavailable.
func NewConsumer(ctx context.Context, cfg ConsumerConfig) (*Consumer, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	m, err := newConsumerMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	transport := &kafka.Transport{
		DialTimeout: time.Second, MetadataTTL: metadataTTL,
		MetadataTopics: []string{cfg.Kafka.Topic, cfg.Kafka.DLQTopic}, ClientID: "sluice-drainer",
	}
	client := &kafka.Client{Addr: kafka.TCP(cfg.Kafka.Brokers...), Transport: transport, Timeout: callTimeout}
	dlq, err := newDLQWriter(ctx, client, cfg.Kafka)
	if err != nil {
		transport.CloseIdleConnections()
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &Consumer{
		member: newMemberRecord(cfg.Kafka.ConsumerGroup, cfg.Kafka.Instance),
		cfg:    cfg, client: client, transport: transport, dlq: dlq, rdb: cfg.Redis,
		log: log, clock: clock.Or(cfg.Clock), m: m, prefix: hex.EncodeToString(b),
		tenants: map[string]*tenantQueue{}, claimed: map[*queue.Claimed]*entry{},
		holding: map[string]*queue.Claimed{}, settled: make(chan struct{}, 1),
		finishes: newFinishGroup(cfg.Redis), quiet: quietlog.New(log, cfg.Clock, quietEvery),
	}, nil
}

// Run joins the consumer group and consumes every partition assigned to
// this member until ctx is done. Call it once. Shut down in this order:
// stop the drainer first (its in-flight jobs finish or are released), then
// cancel ctx. Run then ends the generation (drops unclaimed jobs, waits up
// to RevokeTimeout for claimed ones, commits), leaves the group so the other
// members take the partitions at once, and returns; nil after a clean
// shutdown.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("queue: kafka consumer: Run called twice")
	}
	defer c.transport.CloseIdleConnections()
	k := c.cfg.Kafka
	c.removePredecessor(ctx)
	// The record outlives ctx until the group is left, then is deleted.
	recordCtx, stopRecord := context.WithCancel(context.WithoutCancel(ctx))
	recorded := make(chan struct{})
	go func() { defer close(recorded); c.keepMemberRecord(recordCtx) }()
	defer func() { stopRecord(); <-recorded }()
	// Finishes whose Redis write failed are retried until Run returns,
	// after the generation's revoke.
	retryCtx, stopRetry := context.WithCancel(context.WithoutCancel(ctx))
	retried := make(chan struct{})
	go func() { defer close(retried); c.retryFinishes(retryCtx) }()
	defer func() { stopRetry(); <-retried }()
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
	// are let go) and then leaves the group. kafka-go may hang in close,
	// so it is bounded.
	closed := make(chan struct{})
	go func() { group.Close(); gens.Wait(); close(closed) }()
	select {
	case <-closed:
		return nil
	case <-time.After(c.cfg.RevokeTimeout + callTimeout + closeTimeout):
		return fmt.Errorf("queue: kafka consumer: leaving group %s did not finish in time", k.ConsumerGroup)
	}
}

// Tenants returns the configured tenants plus every tenant with jobs in
// this consumer's FIFOs, sorted.
func (c *Consumer) Tenants(ctx context.Context) ([]string, error) {
	seen := make(map[string]bool, len(c.cfg.Tenants))
	for _, t := range c.cfg.Tenants {
		seen[t] = true
	}
	c.mu.Lock()
	for t, tq := range c.tenants {
		if len(tq.fifos) > 0 || len(tq.deferred) > 0 {
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
