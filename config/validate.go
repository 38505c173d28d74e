package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// nameRe is the shape of an admin name (ingest.admin_tokens); tenant ids and
// job types follow package keys' rules (keys.ValidTenant, keys.ValidID).
var nameRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Validate checks every value and returns all problems at once, each naming
// its key, e.g. "tenants.acme.admission.limit: must be > 0 (got 0)". They
// come in a fixed order: redis, queue and kafka, ingest, drainer, then the
// tenants sorted by name.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	c.Redis.validate(bad)
	c.validateQueue(bad)
	c.Ingest.validate(bad)
	c.validateAdminTokens(bad)
	c.Drainer.validate(bad)
	c.validateTenants(bad)
	return errors.Join(errs...)
}

// validate checks the redis section.
func (r Redis) validate(bad badFunc) {
	if len(r.ClusterAddrs) == 0 && !r.Sentinel.Enabled() {
		checkAddr(bad, "redis.addr", r.Addr)
	}
	for i, a := range r.ClusterAddrs {
		checkAddr(bad, fmt.Sprintf("redis.cluster_addrs[%d]", i), a)
	}
	positiveDur(bad, "redis.timeout", r.Timeout)
	if r.PoolSize < 1 {
		bad("redis.pool_size", "must be >= 1 (got %d)", r.PoolSize)
	}
	r.validateReplication(bad)
}

// validateReplication checks redis.sentinel and redis.wait_*.
func (r Redis) validateReplication(bad badFunc) {
	s := r.Sentinel
	switch {
	case s.MasterName != "" && len(s.Addrs) == 0:
		bad("redis.sentinel.addrs", "must name at least one Sentinel when redis.sentinel.master_name is set")
	case s.MasterName == "" && len(s.Addrs) > 0:
		bad("redis.sentinel.master_name", "must be set when redis.sentinel.addrs is (the name the Sentinels monitor)")
	case s.Enabled() && len(r.ClusterAddrs) > 0:
		bad("redis.sentinel", "cannot be used with redis.cluster_addrs (a Redis Cluster fails over by itself); set one of them")
	}
	for i, a := range s.Addrs {
		checkAddr(bad, fmt.Sprintf("redis.sentinel.addrs[%d]", i), a)
	}
	if r.WaitReplicas < 0 || r.WaitReplicas > MaxWaitReplicas {
		bad("redis.wait_replicas", "must be between 0 (off) and %d (got %d)", MaxWaitReplicas, r.WaitReplicas)
	}
	if r.WaitReplicas > 0 && len(r.ClusterAddrs) > 0 {
		bad("redis.wait_replicas", "cannot be used with redis.cluster_addrs (a keyless WAIT reaches an arbitrary node); use a standalone or Sentinel Redis")
	}
	if r.WaitTimeout < time.Millisecond || r.WaitTimeout > 10*time.Second {
		bad("redis.wait_timeout", "must be a duration from 1ms to 10s (got %s)", r.WaitTimeout)
	} else if r.WaitReplicas > 0 && r.Timeout > 0 && 2*r.WaitTimeout > r.Timeout {
		bad("redis.wait_timeout", "must be at most half of redis.timeout %s, which bounds the enqueue's round trip that carries the WAIT and the scripts before it (got %s)", r.Timeout, r.WaitTimeout)
	}
}

// validateQueue checks the queue backend and the kafka section.
func (c *Config) validateQueue(bad badFunc) {
	switch c.Queue.Backend {
	case "redis":
	case "kafka":
		if len(c.Kafka.Brokers) == 0 {
			bad("kafka.brokers", "must name at least one broker when queue.backend is kafka")
		}
		for i, b := range c.Kafka.Brokers {
			checkAddr(bad, fmt.Sprintf("kafka.brokers[%d]", i), b)
		}
	default:
		bad("queue.backend", "must be redis or kafka (got %q)", c.Queue.Backend)
	}
	if c.Kafka.Topic == "" {
		bad("kafka.topic", "must not be empty")
	}
	if c.Kafka.DLQTopic == "" || c.Kafka.DLQTopic == c.Kafka.Topic {
		bad("kafka.dlq_topic", "must be set and differ from kafka.topic (got %q)", c.Kafka.DLQTopic)
	}
	if c.Kafka.Partitions < 1 {
		bad("kafka.partitions", "must be >= 1 (got %d)", c.Kafka.Partitions)
	}
	c.Kafka.validateReplicas(bad)
	positiveDur(bad, "kafka.produce_timeout", c.Kafka.ProduceTimeout)
	// The linger is spent inside an enqueue's produce_timeout: one as long
	// would fail every enqueue that follows a shared request.
	if c.Kafka.BatchTimeout <= 0 || c.Kafka.BatchTimeout >= c.Kafka.ProduceTimeout {
		bad("kafka.batch_timeout", "must be a positive duration below kafka.produce_timeout %s (got %s)", c.Kafka.ProduceTimeout, c.Kafka.BatchTimeout)
	}
	if c.Kafka.ConsumerGroup == "" {
		bad("kafka.consumer_group", "must not be empty")
	}
	if id := c.Kafka.InstanceID; id != "auto" && id != "none" && !keys.ValidID(id) {
		bad("kafka.instance_id", "must be auto, none or %s (got %q)", keys.IDRule, id)
	}
	c.Kafka.validateGroup(bad)
}

// validateReplicas checks the replication settings of the created topics.
func (k Kafka) validateReplicas(bad badFunc) {
	if k.ReplicationFactor < 0 || k.ReplicationFactor > kafkaq.MaxReplicationFactor {
		bad("kafka.replication_factor", "must be 0 (min(3, brokers)) to %d (got %d)", kafkaq.MaxReplicationFactor, k.ReplicationFactor)
	}
	switch {
	case k.MinInsyncReplicas < 0 || k.MinInsyncReplicas > kafkaq.MaxReplicationFactor:
		bad("kafka.min_insync_replicas", "must be 0 (2 when the replication factor is >= 3) to %d (got %d)", kafkaq.MaxReplicationFactor, k.MinInsyncReplicas)
	case k.ReplicationFactor > 0 && k.MinInsyncReplicas > k.ReplicationFactor:
		bad("kafka.min_insync_replicas", "must be at most kafka.replication_factor %d (got %d)", k.ReplicationFactor, k.MinInsyncReplicas)
	}
}

// validateGroup checks the consumer group's timeouts.
func (k Kafka) validateGroup(bad badFunc) {
	if k.SessionTimeout < 6*time.Second || k.SessionTimeout > 30*time.Minute {
		bad("kafka.session_timeout", "must be from 6s to 30m, the broker's default group.min/max.session.timeout.ms (got %v)", k.SessionTimeout)
	}
	if k.HeartbeatInterval <= 0 || k.HeartbeatInterval >= k.SessionTimeout {
		bad("kafka.heartbeat_interval", "must be > 0 and below kafka.session_timeout %v (got %v)", k.SessionTimeout, k.HeartbeatInterval)
	}
	if k.RebalanceTimeout < time.Second || k.RebalanceTimeout > time.Hour {
		bad("kafka.rebalance_timeout", "must be from 1s to 1h (got %v)", k.RebalanceTimeout)
	}
	if k.RevokeTimeout < 0 || k.RevokeTimeout > time.Hour {
		bad("kafka.revoke_timeout", "must be 0 (the longest target.timeout + 1s) or up to 1h (got %v)", k.RevokeTimeout)
	}
}

// validate checks the ingest section but its admin tokens
// (Config.validateAdminTokens).
func (i Ingest) validate(bad badFunc) {
	checkAddr(bad, "ingest.listen", i.Listen)
	if i.PprofListen != "" {
		checkAddr(bad, "ingest.pprof_listen", i.PprofListen)
		if i.PprofListen == i.Listen {
			bad("ingest.pprof_listen", "must differ from ingest.listen (%q): the profiles are not served to API clients", i.Listen)
		}
	}
	if i.MaxBodyBytes < 1 {
		bad("ingest.max_body_bytes", "must be >= 1 (got %d)", i.MaxBodyBytes)
	}
	if i.MaxBatchJobs < 1 || i.MaxBatchJobs > MaxMaxBatchJobs {
		bad("ingest.max_batch_jobs", "must be between 1 and %d (got %d)", MaxMaxBatchJobs, i.MaxBatchJobs)
	}
	if i.MaxJobCost < 1 || i.MaxJobCost > MaxMaxJobCost {
		bad("ingest.max_job_cost", "must be between 1 and %d (got %d)", MaxMaxJobCost, i.MaxJobCost)
	}
	if i.MaxDelay < time.Second || i.MaxDelay > MaxMaxDelay {
		bad("ingest.max_delay", "must be a duration between 1s and %s (got %s)", MaxMaxDelay, i.MaxDelay)
	}
	if i.MaxScheduled < 1 {
		bad("ingest.max_scheduled", "must be >= 1 (got %d)", i.MaxScheduled)
	}
	positiveDur(bad, "ingest.shutdown_timeout", i.ShutdownTimeout)
	positiveDur(bad, "ingest.retry_after", i.RetryAfter)
	i.validateBounds(bad)
}

// validate checks the drainer section.
func (d Drainer) validate(bad badFunc) {
	checkAddr(bad, "drainer.listen", d.Listen)
	positiveDur(bad, "drainer.lease", d.Lease)
	if d.MaxAttempts < 1 {
		bad("drainer.max_attempts", "must be >= 1 (got %d)", d.MaxAttempts)
	}
	positiveDur(bad, "drainer.backoff_base", d.BackoffBase)
	positiveDur(bad, "drainer.backoff_max", d.BackoffMax)
	if d.BackoffMax < d.BackoffBase {
		bad("drainer.backoff_max", "must be >= drainer.backoff_base (%s < %s)", d.BackoffMax, d.BackoffBase)
	}
	positiveDur(bad, "drainer.shutdown_timeout", d.ShutdownTimeout)

}

// validateTenants checks every tenant, in sorted order (and each tenant's
// job types too), so the problems, and the first field an admin 422 names,
// come in the same order every time. An API key may belong to one tenant
// only.
func (c *Config) validateTenants(bad badFunc) {
	keyOwner := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		t := c.Tenants[name]
		p := "tenants." + name
		if !keys.ValidTenant(name) {
			bad(p, "tenant id must be %s (got %q)", keys.TenantRule, name)
		}
		for i, k := range t.APIKeys {
			kp := fmt.Sprintf("%s.api_keys[%d]", p, i)
			if !validKeyHash(k) {
				bad(kp, "must be \"sha256:\" and 64 hex digits (the SHA-256 of the key; see sluicectl hash-key)")
			} else if other, dup := keyOwner[strings.ToLower(k)]; dup {
				bad(kp, "same key as %s", other)
			} else {
				keyOwner[strings.ToLower(k)] = kp
			}
		}
		t.Admission.validate(bad, p+".admission", "tenant")
		for _, typ := range slices.Sorted(maps.Keys(t.JobTypes)) {
			jt := t.JobTypes[typ]
			jp := p + ".job_types." + typ
			if !keys.ValidID(typ) {
				bad(jp, "job type must be %s (got %q)", keys.IDRule, typ)
			}
			jt.Admission.validate(bad, jp+".admission", "type."+typ)
			jt.Target.validate(bad, jp+".target", false)
		}
		t.Outflow.validate(bad, p+".outflow")
		t.Target.validate(bad, p+".target", false)
		if t.OnLimiterError != "allow" && t.OnLimiterError != "deny" {
			bad(p+".on_limiter_error", "must be allow or deny (got %q)", t.OnLimiterError)
		}
	}
}

type badFunc func(key, format string, args ...any)

// validate checks a policy with limits.Policy.Validate, the one home of the
// bounds the admission script needs (so the configuration file, a reload and
// the admin API refuse exactly what the script would), naming the key:
// "tenants.acme.admission.limit: must be <= 1000000, one unit per µs of
// period 1s (got 2000000)". name is the policy's name in the limiter
// ("tenant", "type.<job type>"). Periods are also whole milliseconds here.
func (a Admission) validate(bad badFunc, p, name string) {
	if a.Algorithm == "" {
		// A period, limit or burst without an algorithm would be stored
		// unchecked and refused later, in a write that never named it.
		if a.Limit != 0 || a.Burst != 0 || a.Period != 0 {
			bad(p+".algorithm", "must be set when a limit, burst or period is given (one of %s)", limits.AlgorithmNames())
		}
		return
	}
	pol, _ := a.Policy(name)
	if err := pol.Validate(); err != nil {
		var pe *limits.PolicyError
		switch {
		case errors.As(err, &pe) && pe.Field != "name":
			bad(p+"."+pe.Field, "%s", pe.Msg)
		case errors.As(err, &pe):
			bad(p, "policy name %q: %s", name, pe.Msg) // a job type too long for a policy name
		default:
			bad(p, "%v", err)
		}
		return
	}
	if a.Period%time.Millisecond != 0 {
		bad(p+".period", "must be a whole number of milliseconds (got %s)", a.Period)
	}
}

// Policy is a as the limiter enforces it, named name ("tenant",
// "type.<job type>"), with its defaults (period 1s, burst = limit) applied;
// ok is false when a has no algorithm (no limit). It does not validate:
// see limits.Policy.Validate.
func (a Admission) Policy(name string) (pol limits.Policy, ok bool) {
	if a.Algorithm == "" {
		return limits.Policy{}, false
	}
	a.applyDefaults()
	return limits.Policy{Name: name, Algorithm: limits.Algorithm(a.Algorithm), Limit: a.Limit, Period: a.Period, Burst: a.Burst}, true
}

func (o Outflow) validate(bad badFunc, p string) {
	switch {
	case o.Rate != 0 && rateProblem(o.Rate) != "":
		bad(p+".rate", "%s", rateProblem(o.Rate))
	case o.Unlimited && o.Rate != 0:
		bad(p+".unlimited", "true excludes a rate (got rate %g); leave out one of them", o.Rate)
	case !o.Unlimited && o.Rate == 0:
		bad(p+".rate", "must be set, in units per second > 0, or outflow.unlimited true; %s", StopHint)
	}
	if msg := capacityProblem(o.Capacity, o.Shaped()); msg != "" {
		bad(p+".capacity", "%s", msg)
	}
	// max_backlog goes to admit.lua as a Lua number (exact below 2^53);
	// concurrency is the semaphore's size in semaphore_acquire.lua.
	if o.MaxBacklog < 0 || o.MaxBacklog > limits.MaxCost {
		bad(p+".max_backlog", "must be between 0 and %d (got %d)", limits.MaxCost, o.MaxBacklog)
	}
	if o.Concurrency < 0 || o.Concurrency > MaxConcurrency {
		bad(p+".concurrency", "must be between 0 and %d (got %d)", MaxConcurrency, o.Concurrency)
	}
	if msg := minRateProblem(o.MinRate, o.Rate, o.Shaped()); msg != "" {
		bad(p+".min_rate", "%s", msg)
	}
}

func (t Target) validate(bad badFunc, p string, required bool) {
	if t.URL == "" {
		if required {
			bad(p+".url", "must be set")
		}
		return
	}
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad(p+".url", "must be an absolute http or https URL (got %q)", t.URL)
	} else if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			bad(p+".url", "port must be 1 to 65535 (got %q in %q)", port, t.URL)
		}
	}
	positiveDur(bad, p+".timeout", t.Timeout)
}

// Bounds of the HTTP server's client limits: below the minimum no honest
// client gets through, above the maximum a client is not bounded at all.
const (
	maxClientTimeout = time.Hour
	minHeaderBytes   = 1 << 10
	maxHeaderBytes   = 16 << 20
)

// validateBounds checks the limits the HTTP server puts on each client.
func (in Ingest) validateBounds(bad badFunc) {
	for _, d := range []struct {
		key string
		d   time.Duration
	}{
		{"ingest.read_header_timeout", in.ReadHeaderTimeout},
		{"ingest.body_timeout", in.BodyTimeout},
		{"ingest.write_timeout", in.WriteTimeout},
		{"ingest.idle_timeout", in.IdleTimeout},
	} {
		if d.d <= 0 || d.d > maxClientTimeout {
			bad(d.key, "must be a duration from 1ns to %s (got %s)", maxClientTimeout, d.d)
		}
	}
	if in.MaxHeaderBytes < minHeaderBytes || in.MaxHeaderBytes > maxHeaderBytes {
		bad("ingest.max_header_bytes", "must be from %d to %d (got %d)", minHeaderBytes, maxHeaderBytes, in.MaxHeaderBytes)
	}
}

func positiveDur(bad badFunc, key string, d time.Duration) {
	if d <= 0 {
		bad(key, "must be a positive duration (got %s)", d)
	}
}

func checkAddr(bad badFunc, key, addr string) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		bad(key, "must be host:port (got %q)", addr)
	}
}

func validKeyHash(k string) bool {
	h, ok := strings.CutPrefix(k, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}
