// Package config loads, validates and holds sluice's configuration: a YAML
// file (given by --config or SLUICE_CONFIG) with SLUICE_* environment
// overrides (SLUICE_REDIS_ADDR overrides redis.addr, and so on). Unknown keys
// and invalid values are errors that name the key and the reason.
package config

import (
	"time"
)

// Config is the whole configuration of ingest and drainer.
type Config struct {
	Redis   Redis             `mapstructure:"redis"`
	Queue   Queue             `mapstructure:"queue"`
	Kafka   Kafka             `mapstructure:"kafka"`
	Ingest  Ingest            `mapstructure:"ingest"`
	Drainer Drainer           `mapstructure:"drainer"`
	Tenants map[string]Tenant `mapstructure:"tenants"`
}

// Redis says where Redis is.
type Redis struct {
	// Addr is a standalone Redis (default 127.0.0.1:6379). Ignored when
	// ClusterAddrs is set.
	Addr string `mapstructure:"addr"`
	// ClusterAddrs, when set, are seed addresses of a Redis Cluster.
	ClusterAddrs []string `mapstructure:"cluster_addrs"`
	// Password is the AUTH password (default none).
	Password string `mapstructure:"password"`
	// DB is the database number of a standalone Redis (default 0).
	DB int `mapstructure:"db"`
	// Timeout bounds every Redis command (default 250ms), so a dead Redis
	// turns into fail-open/fail-closed quickly instead of piling up requests.
	Timeout time.Duration `mapstructure:"timeout"`
	// PoolSize is the connection pool size per node (default 10 × GOMAXPROCS).
	PoolSize int `mapstructure:"pool_size"`
	// Sentinel, when set, names a master that Redis Sentinels monitor: the
	// client asks them for the current primary and follows a failover
	// without a restart. Exclusive with ClusterAddrs; Addr is then ignored.
	Sentinel Sentinel `mapstructure:"sentinel"`
	// WaitReplicas, when >= 1, makes every Redis-backend enqueue wait until
	// that many replicas have the write (Redis WAIT, in the enqueue's own
	// round trip) before ingest answers 202; fewer within WaitTimeout is a
	// 503 + Retry-After whose outcome is unknown (the primary has the job).
	// 0 (the default) does not wait: a failover may lose the last writes
	// the replica had not received. 0 to 16; not with ClusterAddrs. Read
	// at start, as WaitTimeout: a reload keeps the values the process
	// started with (changing them needs a restart). Scheduled jobs wait on
	// both queue backends (ingest stores them in Redis); on the Kafka
	// backend the ordinary enqueue does not (Kafka's in-sync replicas
	// acknowledge it).
	WaitReplicas int `mapstructure:"wait_replicas"`
	// WaitTimeout bounds that WAIT (default 100ms, 1ms to 10s, at most
	// half of Timeout, which bounds the whole round trip).
	WaitTimeout time.Duration `mapstructure:"wait_timeout"`
}

// Sentinel names the master a set of Redis Sentinels monitor.
type Sentinel struct {
	// MasterName is the name the Sentinels monitor the master under.
	MasterName string `mapstructure:"master_name"`
	// Addrs are the Sentinels' host:port (any of them answers).
	Addrs []string `mapstructure:"addrs"`
	// Password is the Sentinels' own AUTH password (default none; the
	// servers' is Redis.Password).
	Password string `mapstructure:"password"`
}

// Enabled reports whether a Sentinel master is configured.
func (s Sentinel) Enabled() bool { return s.MasterName != "" }

// Queue selects the queue backend.
type Queue struct {
	// Backend is "redis" (one list per tenant, the default) or "kafka".
	Backend string `mapstructure:"backend"`
}

// Kafka configures the Kafka backend.
type Kafka struct {
	// Brokers are the bootstrap brokers (default [127.0.0.1:9092]).
	Brokers []string `mapstructure:"brokers"`
	// Topic holds every job, keyed by tenant (default sluice.jobs).
	Topic string `mapstructure:"topic"`
	// Partitions is used when the topic is created (default 12).
	Partitions int `mapstructure:"partitions"`
	// ReplicationFactor is used when sluice creates its topics (the jobs
	// topic and the DLQ topic): 0, the default, is min(3, the brokers in
	// the cluster's metadata); at most 32. An existing topic is kept as it
	// is; one with fewer replicas is logged as a warning at start.
	ReplicationFactor int `mapstructure:"replication_factor"`
	// MinInsyncReplicas is the created topics' min.insync.replicas, how
	// many replicas must hold a job before it is acknowledged (acks=all):
	// with fewer in sync, an enqueue is answered 503 + Retry-After, never
	// 202. 0, the default, is 2 when the replication factor is 3 or more
	// (a 202 survives the loss of any one broker, and writes go on with one
	// broker down), else the broker's default; at most the replication
	// factor.
	MinInsyncReplicas int `mapstructure:"min_insync_replicas"`
	// DLQTopic receives dead jobs (default sluice.dlq).
	DLQTopic string `mapstructure:"dlq_topic"`
	// BatchTimeout is the longest a produce waits for a batch to fill
	// (default 100µs); concurrent requests share batches.
	BatchTimeout time.Duration `mapstructure:"batch_timeout"`
	// ProduceTimeout bounds one enqueue until every in-sync replica has
	// acknowledged (default 2s); past it, or when the broker cannot be
	// reached, ingest answers 503 + Retry-After.
	ProduceTimeout time.Duration `mapstructure:"produce_timeout"`
	// ConsumerGroup is the drainers' consumer group (default sluice-drainer).
	ConsumerGroup string `mapstructure:"consumer_group"`
	// InstanceID names a drainer instance across restarts of its process
	// (default "auto": the host name and the drainer's metrics port, which
	// a restarted container or process keeps and which differs between
	// drainers of one host; "none" turns it off). A drainer killed without
	// leaving the group is removed from it by its restarted process, so the
	// rebalance does not wait out session_timeout (queue/kafkaq member.go).
	InstanceID string `mapstructure:"instance_id"`
	// SessionTimeout is how long the group waits for a silent drainer before
	// its partitions go to the others (default 6s, the broker's least):
	// shorter, a crashed drainer's partitions move sooner, and a crashed
	// drainer that restarts holds the whole group's rebalance for what is
	// left of its old session; longer, a drainer paused by a long GC or a
	// slow host is less often thrown out. The broker refuses one outside
	// group.min/max.session.timeout.ms (6s..30min by default).
	SessionTimeout time.Duration `mapstructure:"session_timeout"`
	// HeartbeatInterval is how often a drainer tells the group it lives
	// (default 1s); below session_timeout, about a third of it or less.
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	// RebalanceTimeout bounds a rebalance: how long the group waits for
	// every member to let its partitions go and join again (default 30s,
	// raised to revoke_timeout + 10s when that is longer).
	RebalanceTimeout time.Duration `mapstructure:"rebalance_timeout"`
	// RevokeTimeout is how long a drainer whose partitions are revoked waits
	// for the deliveries it started from them to end before it commits and
	// lets them go, so the next owner does not start them a second time
	// while the first delivery still runs. 0 (the default) is the longest
	// delivery timeout of the configured tenants (target.timeout) + 1s, at
	// least 5s. Longer waits hold the rebalance (and every partition's
	// consumption) that long; shorter ones send slow deliveries twice.
	RevokeTimeout time.Duration `mapstructure:"revoke_timeout"`
}

// Ingest configures the HTTP API.
type Ingest struct {
	// Listen is the HTTP address (default 127.0.0.1:8080).
	Listen string `mapstructure:"listen"`
	// MaxBodyBytes caps a request body (default 1 MiB); larger gets 413.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// MaxBatchJobs caps the jobs of one batch request (default 1000).
	MaxBatchJobs int `mapstructure:"max_batch_jobs"`
	// MaxJobCost is the most units one job may cost (default
	// DefaultMaxJobCost, 1,000,000; at most MaxMaxJobCost, 1,000,000,000).
	// A tenant's own bound is lower when its admission policies' capacities
	// or its outflow capacity are: a job above it is a 422, never queued.
	MaxJobCost int64 `mapstructure:"max_job_cost"`
	// MaxDelay bounds how far ahead a job may be scheduled ("not_before"
	// or "delay"; default DefaultMaxDelay, 720h = 30 days; at most
	// MaxMaxDelay, 8760h). A due time beyond now + MaxDelay is a 422.
	MaxDelay time.Duration `mapstructure:"max_delay"`
	// MaxScheduled bounds each tenant's scheduled jobs not yet due
	// (default DefaultMaxScheduled, 100,000). A submission that would
	// exceed it is a 429 naming ingest.max_scheduled; scheduled jobs do not
	// count in the backlog (max_backlog) until they are due.
	MaxScheduled int64 `mapstructure:"max_scheduled"`
	// ShutdownTimeout bounds the drain of in-flight requests on SIGTERM
	// (default 10s).
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// RetryAfter is the Retry-After given with a 503 when a backend is down
	// (default 1s).
	RetryAfter time.Duration `mapstructure:"retry_after"`
	// ReadHeaderTimeout bounds reading a request's line and headers
	// (default 10s); a slower client's connection is closed.
	ReadHeaderTimeout time.Duration `mapstructure:"read_header_timeout"`
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers (default 30s); a body that has not fully arrived by then is
	// answered 408 and its connection closed.
	BodyTimeout time.Duration `mapstructure:"body_timeout"`
	// WriteTimeout bounds writing the answer (default 10s): from the end
	// of the request's body (of its headers, for a request without one) to
	// the answer's last byte. A client that does not read its answer in
	// time has its connection closed. Admin API answers get 5s more. Keep
	// it above the longest a handler works (kafka.produce_timeout, a few
	// redis.timeout): an answer cut short is lost to the client even when
	// its job was queued (a retry with the job's id gets the stored answer).
	WriteTimeout time.Duration `mapstructure:"write_timeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request (default 2m).
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// MaxHeaderBytes caps a request's line and headers together (default
	// 65536; net/http allows 4 KiB of slack over it); larger gets 431.
	MaxHeaderBytes int `mapstructure:"max_header_bytes"`
	// PprofListen, when set, is a second address on which ingest serves
	// net/http/pprof's /debug/pprof/ endpoints, for profiles under load
	// (default "": off). It is never the API's listener (ingest.listen),
	// which clients reach; keep it on loopback or another private address.
	PprofListen string `mapstructure:"pprof_listen"`
	// AdminTokens enable the admin API (/admin/v1) and name who may use it:
	// operator name (the "who" of the audit log, [A-Za-z0-9._-]{1,64}) →
	// the SHA-256 of the operator's bearer token, "sha256:<hex>" (HashKey).
	// Default none: the admin API answers 404.
	AdminTokens map[string]string `mapstructure:"admin_tokens"`
}

// Drainer configures the drainer workers.
type Drainer struct {
	// Listen is the address of /metrics, /healthz, /readyz (default
	// 127.0.0.1:8081).
	Listen string `mapstructure:"listen"`
	// Lease is how long a claimed job stays leased before a reaper returns it
	// to the queue (default 30s).
	Lease time.Duration `mapstructure:"lease"`
	// MaxAttempts bounds delivery attempts before the DLQ (default 10).
	MaxAttempts int `mapstructure:"max_attempts"`
	// BackoffBase and BackoffMax shape exponential backoff with full jitter
	// (defaults 500ms and 5m).
	BackoffBase time.Duration `mapstructure:"backoff_base"`
	BackoffMax  time.Duration `mapstructure:"backoff_max"`
	// ShutdownTimeout bounds the graceful stop on SIGTERM (default 30s).
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// Pprof serves net/http/pprof's /debug/pprof/ endpoints on the ops
	// listener (drainer.listen), for profiles under load (default false).
	Pprof bool `mapstructure:"pprof"`
}

// Tenant is one tenant's limits, outflow and target.
type Tenant struct {
	// APIKeys are the tenant's keys, stored hashed: "sha256:<hex>".
	APIKeys []string `mapstructure:"api_keys"`
	// Admission is the tenant-wide admission policy.
	Admission Admission `mapstructure:"admission"`
	// JobTypes add per-type admission policies and targets. A job of a type
	// listed here must pass both the tenant's and the type's policy.
	JobTypes map[string]JobType `mapstructure:"job_types"`
	// Outflow shapes delivery to the downstream.
	Outflow Outflow `mapstructure:"outflow"`
	// Target is where jobs are delivered.
	Target Target `mapstructure:"target"`
	// OnLimiterError is "allow" (fail open, with an in-process limiter as a
	// rough bound; the default) or "deny" (fail closed: 503 + Retry-After)
	// when Redis cannot be reached.
	OnLimiterError string `mapstructure:"on_limiter_error"`
}

// JobType holds a job type's own policy and target.
type JobType struct {
	// Admission, when its algorithm is set, is checked with the tenant's.
	Admission Admission `mapstructure:"admission"`
	// Target, when its URL is set, replaces the tenant's target.
	Target Target `mapstructure:"target"`
}

// Admission is one admission policy. Its bounds are those of
// limits.Policy.Validate, which Validate runs (config.Admission.Policy
// converts it): limit >= 1 and at most one unit per µs of period, 1ms <=
// period <= limits.MaxPeriod (366 days) in whole milliseconds, burst ×
// period in µs < 2^53 (gcra, token_bucket), limit × period in µs < 2^53
// (sliding_window), limit <= limits.MaxLogLimit (sliding_log).
type Admission struct {
	// Algorithm is fixed_window, sliding_window, gcra, token_bucket or
	// sliding_log. Empty means no policy (everything is admitted).
	Algorithm string `mapstructure:"algorithm"`
	// Limit is how many units are admitted per Period.
	Limit int64 `mapstructure:"limit"`
	// Period is the window (default 1s).
	Period time.Duration `mapstructure:"period"`
	// Burst is how many units may arrive at once (gcra and token_bucket;
	// default Limit).
	Burst int64 `mapstructure:"burst"`
}

// Outflow is the tenant's leaky bucket on the drain side.
type Outflow struct {
	// Rate is jobs (cost units) per second leaving for the downstream,
	// across all drainers: MinOutflowRate (0.001) <= Rate <= MaxOutflowRate
	// (1,000,000). It is never 0: a
	// given rate of 0 is refused (see OutflowHook); for no limit set
	// Unlimited. Shaped tells which of the two an outflow is.
	Rate float64 `mapstructure:"rate,omitempty"`
	// Unlimited says delivery is not rate-limited (outflow.unlimited: true);
	// it excludes Rate. An outflow without a rate defaults to it.
	Unlimited bool `mapstructure:"unlimited,omitempty"`
	// Capacity is the bucket's size in units (default max(1, Rate)), from 1
	// to MaxOutflowCapacity (1,000,000,000). An unlimited outflow has no
	// bucket: the defaults make its Capacity 0.
	Capacity float64 `mapstructure:"capacity"`
	// MaxBacklog caps the tenant's queued units; at the cap ingest answers
	// 429 with Retry-After = backlog ÷ rate (default 0: no cap).
	MaxBacklog int64 `mapstructure:"max_backlog"`
	// Concurrency caps the tenant's jobs in flight across all drainers
	// (default 0: no cap).
	Concurrency int `mapstructure:"concurrency"`
	// Adaptive lowers the effective rate on downstream 429/503 and recovers
	// it on success (default true).
	Adaptive *bool `mapstructure:"adaptive"`
	// MinRate is the floor of the adaptive rate (default Rate ÷ 10), a
	// finite number from 0 to Rate. The defaults make it 0 when unlimited.
	MinRate float64 `mapstructure:"min_rate"`
	// Paused stops delivery (default false): no drainer starts a new
	// delivery of the tenant's jobs (those in flight finish), while ingest
	// keeps admitting into the backlog up to MaxBacklog. Resuming goes on
	// at the shaped rate, at most Capacity at once. It is independent of
	// the rate, which is never 0 (see StopHint).
	Paused bool `mapstructure:"paused"`
}

// Target is a downstream endpoint.
type Target struct {
	// URL receives an HTTP POST of each job's payload.
	URL string `mapstructure:"url"`
	// Timeout bounds one delivery (default 10s).
	Timeout time.Duration `mapstructure:"timeout"`
}
