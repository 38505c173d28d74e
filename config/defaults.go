package config

import (
	"runtime"
	"time"

	"github.com/spf13/viper"

	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue/backend"
	"github.com/sluicehq/sluice/queue/kafkaq"
	"github.com/sluicehq/sluice/queue/redisq"
)

// DefaultMaxJobCost is the default of ingest.max_job_cost.
const DefaultMaxJobCost = 1_000_000

// MaxMaxJobCost is the largest ingest.max_job_cost: the outflow bucket keeps
// water in micro-units in Lua doubles, so cost × 10^6 must stay far below
// 2^53.
const MaxMaxJobCost = 1_000_000_000

// MaxMaxBatchJobs is the largest ingest.max_batch_jobs: a batch is decided,
// enqueued and answered in one request, under write_timeout.
const MaxMaxBatchJobs = 100_000

// The drainer's defaults: the drainer.* keys below and, for a zero field of
// a config.Drainer or config.Target it is given, drainer.New and its sink
// (package drainer applies these constants; they are defined nowhere else).
const (
	// DefaultLease is drainer.lease: the Redis backend's lease
	// (redisq.DefaultLease) and a delivery's in-flight lease.
	DefaultLease = redisq.DefaultLease
	// DefaultMaxAttempts is drainer.max_attempts.
	DefaultMaxAttempts = 10
	// DefaultBackoffBase is drainer.backoff_base.
	DefaultBackoffBase = 500 * time.Millisecond
	// DefaultBackoffMax is drainer.backoff_max.
	DefaultBackoffMax = 5 * time.Minute
	// DefaultDrainerShutdownTimeout is drainer.shutdown_timeout.
	DefaultDrainerShutdownTimeout = 30 * time.Second
	// DefaultTargetTimeout is target.timeout, of a tenant and of a job type.
	DefaultTargetTimeout = 10 * time.Second
)

// DefaultMaxDelay is the default of ingest.max_delay, MaxMaxDelay its
// largest value.
const (
	DefaultMaxDelay = 720 * time.Hour
	MaxMaxDelay     = 8760 * time.Hour
)

// DefaultMaxScheduled is the default of ingest.max_scheduled.
const DefaultMaxScheduled = 100_000

// DefaultRedisTimeout is the default of redis.timeout.
const DefaultRedisTimeout = 250 * time.Millisecond

// DefaultWaitTimeout is the default of redis.wait_timeout.
const DefaultWaitTimeout = lua.DefaultWaitTimeout

// MaxWaitReplicas bounds redis.wait_replicas.
const MaxWaitReplicas = 16

// DefaultIngest returns the ingest section a file that sets none of it
// loads as: the one definition of each ingest default, which config.Load
// registers (setDefaults) and Ingest.WithDefaults applies to a config built
// by hand. It has no admin tokens.
func DefaultIngest() Ingest {
	return Ingest{
		Listen:            "127.0.0.1:8080",
		MaxBodyBytes:      1 << 20,
		MaxBatchJobs:      1000,
		MaxJobCost:        DefaultMaxJobCost,
		MaxDelay:          DefaultMaxDelay,
		MaxScheduled:      DefaultMaxScheduled,
		ShutdownTimeout:   10 * time.Second,
		RetryAfter:        time.Second,
		ReadHeaderTimeout: 10 * time.Second,
		BodyTimeout:       30 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// WithDefaults returns i with each numeric setting that is zero or negative
// (never the case after config.Load, which validates) replaced by
// DefaultIngest's. Listen and AdminTokens are left as they are: an empty
// Listen is net.Listen's (every interface, any port), and no tokens means
// no admin API.
func (i Ingest) WithDefaults() Ingest {
	d := DefaultIngest()
	orDefault(&i.MaxBodyBytes, d.MaxBodyBytes)
	orDefault(&i.MaxBatchJobs, d.MaxBatchJobs)
	orDefault(&i.MaxJobCost, d.MaxJobCost)
	orDefault(&i.MaxDelay, d.MaxDelay)
	orDefault(&i.MaxScheduled, d.MaxScheduled)
	orDefault(&i.ShutdownTimeout, d.ShutdownTimeout)
	orDefault(&i.RetryAfter, d.RetryAfter)
	orDefault(&i.ReadHeaderTimeout, d.ReadHeaderTimeout)
	orDefault(&i.BodyTimeout, d.BodyTimeout)
	orDefault(&i.WriteTimeout, d.WriteTimeout)
	orDefault(&i.IdleTimeout, d.IdleTimeout)
	orDefault(&i.MaxHeaderBytes, d.MaxHeaderBytes)
	return i
}

// orDefault sets *v to def when it is zero or negative.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// setDefaults registers every non-tenant key with its default, which also
// makes each one overridable by its SLUICE_* environment variable.
func setDefaults(v *viper.Viper) {
	in := DefaultIngest()
	for key, val := range map[string]any{
		"redis.addr":                 "127.0.0.1:6379",
		"redis.cluster_addrs":        []string{},
		"redis.password":             "",
		"redis.db":                   0,
		"redis.timeout":              DefaultRedisTimeout,
		"redis.pool_size":            10 * runtime.GOMAXPROCS(0),
		"redis.sentinel.master_name": "",
		"redis.sentinel.addrs":       []string{},
		"redis.sentinel.password":    "",
		"redis.wait_replicas":        0,
		"redis.wait_timeout":         DefaultWaitTimeout,
		"queue.backend":              backend.Redis,
		"kafka.brokers":              []string{kafkaq.DefaultBroker},
		"kafka.topic":                kafkaq.DefaultTopic,
		"kafka.partitions":           kafkaq.DefaultPartitions,
		"kafka.replication_factor":   kafkaq.DefaultReplicationFactor,
		"kafka.dlq_topic":            kafkaq.DefaultDLQTopic,
		"kafka.batch_timeout":        kafkaq.DefaultBatchTimeout,
		"kafka.produce_timeout":      kafkaq.DefaultProduceTimeout,
		"kafka.consumer_group":       kafkaq.DefaultConsumerGroup,
		"kafka.instance_id":          "auto",
		"kafka.session_timeout":      kafkaq.DefaultSessionTimeout,
		"kafka.heartbeat_interval":   kafkaq.DefaultHeartbeat,
		"kafka.rebalance_timeout":    kafkaq.DefaultRebalanceTimeout,
		"kafka.revoke_timeout":       time.Duration(0),
		"ingest.listen":              in.Listen,
		"ingest.max_body_bytes":      in.MaxBodyBytes,
		"ingest.max_batch_jobs":      in.MaxBatchJobs,
		"ingest.max_job_cost":        in.MaxJobCost,
		"ingest.max_delay":           in.MaxDelay,
		"ingest.max_scheduled":       in.MaxScheduled,
		"ingest.shutdown_timeout":    in.ShutdownTimeout,
		"ingest.retry_after":         in.RetryAfter,
		"ingest.pprof_listen":        "",
		"drainer.listen":             "127.0.0.1:8081",
		"drainer.lease":              DefaultLease.String(),
		"drainer.max_attempts":       DefaultMaxAttempts,
		"drainer.backoff_base":       DefaultBackoffBase.String(),
		"drainer.backoff_max":        DefaultBackoffMax.String(),
		"drainer.shutdown_timeout":   DefaultDrainerShutdownTimeout.String(),
		"drainer.pprof":              false,

		// min.insync.replicas of the topics sluice creates (0: 2 when the
		// replication factor is 3 or more).
		"kafka.min_insync_replicas": kafkaq.DefaultMinInsyncReplicas,

		// The HTTP server's bounds on each client.
		"ingest.read_header_timeout": in.ReadHeaderTimeout,
		"ingest.body_timeout":        in.BodyTimeout,
		"ingest.write_timeout":       in.WriteTimeout,
		"ingest.idle_timeout":        in.IdleTimeout,
		"ingest.max_header_bytes":    in.MaxHeaderBytes,
	} {
		v.SetDefault(key, val)
	}
}

// applyDefaults fills the per-tenant defaults that viper cannot express
// (tenants are a map of arbitrary names).
func (c *Config) applyDefaults() {
	for name, t := range c.Tenants {
		t.Admission.applyDefaults()
		for typ, jt := range t.JobTypes {
			jt.Admission.applyDefaults()
			if jt.Target.Timeout == 0 {
				jt.Target.Timeout = DefaultTargetTimeout
			}
			t.JobTypes[typ] = jt
		}
		t.Outflow = t.Outflow.WithDefaults()
		if t.Target.Timeout == 0 {
			t.Target.Timeout = DefaultTargetTimeout
		}
		if t.OnLimiterError == "" {
			t.OnLimiterError = "allow"
		}
		c.Tenants[name] = t
	}
}

func (a *Admission) applyDefaults() {
	if a.Algorithm == "" {
		return
	}
	if a.Period == 0 {
		a.Period = time.Second
	}
	if a.Burst == 0 {
		a.Burst = DefaultBurst(a.Limit)
	}
}

// The defaults a field derives from another, in one place: config.Load
// applies them, and an admin PATCH of the source lets a field still at its
// default follow it (tenants.ApplyPatch).

// DefaultBurst is an admission policy's burst when none is given: its
// limit.
func DefaultBurst(limit int64) int64 { return limit }

// DefaultCapacity is a shaped outflow's bucket capacity when none is
// given: max(1, rate).
func DefaultCapacity(rate float64) float64 { return max(1, rate) }

// DefaultMinRate is a shaped outflow's adaptive floor when none is given:
// rate ÷ 10.
func DefaultMinRate(rate float64) float64 { return rate / 10 }

// BucketCapacity is the size of the outflow bucket in units: Capacity, or
// max(1, Rate) when Capacity is 0. It is meaningful only when Rate > 0 (a
// shaped outflow); an unlimited outflow has no bucket.
func (o Outflow) BucketCapacity() float64 {
	if o.Capacity > 0 {
		return o.Capacity
	}
	return DefaultCapacity(o.Rate)
}

// WithDefaults returns o with the defaults config.Load gives an outflow:
// Unlimited when no rate is set (a rate of 0 given in a file or spec is
// refused before this, by OutflowHook), capacity max(1, Rate) and min_rate
// Rate ÷ 10 when shaped, adaptive on. An unlimited outflow has no bucket,
// so its capacity and min_rate are dropped (0): they would otherwise be
// shown, stored and carried to the next rate while nothing reads them (see
// docs/adr/0011). outflow.Of applies it to whatever outflow the drainers
// and the stats are given, so a config.Config built by hand without an
// outflow is unlimited as a loaded one is.
func (o Outflow) WithDefaults() Outflow {
	if o.Rate == 0 {
		o.Unlimited = true
		o.Capacity, o.MinRate = 0, 0
	}
	if o.Capacity == 0 && o.Shaped() {
		o.Capacity = o.BucketCapacity()
	}
	if o.Adaptive == nil {
		on := true
		o.Adaptive = &on
	}
	if o.MinRate == 0 && o.Shaped() {
		o.MinRate = DefaultMinRate(o.Rate)
	}
	return o
}

// AdaptiveOn reports whether adaptive outflow is on (the default).
func (o Outflow) AdaptiveOn() bool { return o.Adaptive == nil || *o.Adaptive }
