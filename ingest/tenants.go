package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/lua"
)

// snapshot is everything a request needs from the configuration, computed
// once per SetConfig so that the request path does map lookups only. A
// snapshot is never modified after it is published.
type snapshot struct {
	// byKey maps the SHA-256 of an API key to its tenant.
	byKey map[[sha256.Size]byte]*tenantState
	// tenants holds every configured tenant by name.
	tenants map[string]*tenantState
	// maxBody, maxBatch, retryAfter, redisTimeout and shutdown are the
	// effective ingest settings.
	maxBody  int64
	maxBatch int
	// maxDelay and maxScheduled bound scheduled jobs (ingest.max_delay,
	// ingest.max_scheduled).
	maxDelay     time.Duration
	maxScheduled int64
	retryAfter   time.Duration
	redisTimeout time.Duration
	shutdown     time.Duration
	// wait is the replica wait of a scheduled jobs' store
	// (redis.wait_replicas, redis.wait_timeout), read from the first
	// config and kept by every reload, as the Redis producer's wait (set at
	// start): changing it needs a restart.
	wait lua.Wait
	// bodyTimeout and writeTimeout bound each request from the config
	// current at its start; readHeaderTimeout, idleTimeout and
	// maxHeaderBytes are the http.Server's, set when Serve starts.
	bodyTimeout       time.Duration
	writeTimeout      time.Duration
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	maxHeaderBytes    int
	// backend is the queue backend's name, given in a 503 when it is down.
	backend string
	// listen is the address Run listens on.
	listen string
	// kafkaBrokers and kafkaTopic are checked by /readyz on the Kafka
	// backend.
	kafkaBrokers []string
	kafkaTopic   string
	// invalid lists policies the limiter will refuse (limits.Policy.Validate).
	// config.Validate runs that same check on the file, a reload and every
	// admin write, so a validated config has none; this is a defence for a
	// config.Config built by hand or a runtime spec stored by an older
	// version. SetConfig logs them, and their tenants' requests that reach
	// admission get a 500 (limits.ErrInvalidRequest never fails open).
	invalid []error
}

// tenantState is one tenant's precomputed admission inputs.
type tenantState struct {
	name string
	// allowOnError is on_limiter_error == "allow" (fail open).
	allowOnError bool
	// tenantPolicy is the tenant-wide policy (name "tenant"), nil when the
	// tenant has no admission algorithm: tenantOnly's element.
	tenantPolicy *limits.Policy
	// tenantOnly is the tenant policy alone as a charge's policy list (nil
	// when there is none): one slice shared by every request that charges no
	// job-type policy, read only (its capacity is 1, so an append copies).
	tenantOnly []limits.Policy
	// typePolicies holds the policy (name "type.<type>") of each job type
	// that has an admission algorithm.
	typePolicies map[string]limits.Policy
	// items holds each policy's RateLimit-Policy list member, by policy
	// name, as the header value of that member alone: a slice of one
	// element and capacity 1 shared by the answers, never written.
	items map[string][]string
	// local holds the in-process fail-open limiter of each policy.
	local map[string]*limits.Local
	// algorithm is the metric label of the tenant's decisions: the tenant
	// policy's algorithm, or "none".
	algorithm string
	// maxBacklog is the backlog gate's input.
	maxBacklog int64
	// maxCost is the most one job of a type without a policy of its own may
	// cost, typeMaxCost that of each type with one (see maxJobCost).
	maxCost     costBound
	typeMaxCost map[string]costBound
	// outflow is the tenant's outflow configuration, defaults applied
	// (config.Outflow.WithDefaults): its rate gives a backlog refusal's
	// Retry-After when Shaped, and the stats API shows it.
	outflow config.Outflow
}

// newSnapshot precomputes cfg for the request path. old, when not nil, is the
// snapshot being replaced: its fail-open limiters are kept for policies that
// did not change, so a reload does not hand every tenant a fresh burst.
func newSnapshot(cfg *config.Config, old *snapshot) *snapshot {
	in := cfg.Ingest.WithDefaults() // a config built by hand may leave zeros
	s := &snapshot{
		byKey:        map[[sha256.Size]byte]*tenantState{},
		tenants:      map[string]*tenantState{},
		maxBody:      in.MaxBodyBytes,
		maxBatch:     in.MaxBatchJobs,
		maxDelay:     in.MaxDelay,
		maxScheduled: in.MaxScheduled,
		retryAfter:   in.RetryAfter,
		redisTimeout: cfg.Redis.Timeout,
		shutdown:     in.ShutdownTimeout,
		wait:         lua.Wait{Replicas: cfg.Redis.WaitReplicas, Timeout: cfg.Redis.WaitTimeout},

		bodyTimeout:       in.BodyTimeout,
		writeTimeout:      in.WriteTimeout,
		readHeaderTimeout: in.ReadHeaderTimeout,
		idleTimeout:       in.IdleTimeout,
		maxHeaderBytes:    in.MaxHeaderBytes,

		backend:      cfg.Queue.Backend,
		listen:       cfg.Ingest.Listen,
		kafkaBrokers: cfg.Kafka.Brokers,
		kafkaTopic:   cfg.Kafka.Topic,
	}
	if old != nil {
		s.wait = old.wait
	}
	if s.redisTimeout <= 0 {
		s.redisTimeout = config.DefaultRedisTimeout
	}
	if s.backend == "" {
		s.backend = "redis"
	}
	for name, t := range cfg.Tenants {
		var prev *tenantState
		if old != nil {
			prev = old.tenants[name]
		}
		ts := newTenantState(name, t, prev, in.MaxJobCost)
		s.tenants[name] = ts
		for _, p := range ts.allPolicies() {
			if err := p.Validate(); err != nil {
				s.invalid = append(s.invalid, fmt.Errorf("tenant %s: %w", name, err))
			}
		}
		for _, k := range t.APIKeys {
			h, ok := strings.CutPrefix(strings.ToLower(k), "sha256:")
			if !ok {
				continue
			}
			raw, err := hex.DecodeString(h)
			if err != nil || len(raw) != sha256.Size {
				continue // config.Validate rejects these; never match them
			}
			s.byKey[[sha256.Size]byte(raw)] = ts
		}
	}
	return s
}

// newTenantState precomputes tenant t called name; maxJobCost is
// ingest.max_job_cost (0: the default).
func newTenantState(name string, t config.Tenant, old *tenantState, maxJobCost int64) *tenantState {
	ts := &tenantState{
		name:         name,
		allowOnError: t.OnLimiterError != "deny",
		typePolicies: map[string]limits.Policy{},
		typeMaxCost:  map[string]costBound{},
		items:        map[string][]string{},
		local:        map[string]*limits.Local{},
		algorithm:    "none",
		maxBacklog:   t.Outflow.MaxBacklog,
		outflow:      t.Outflow.WithDefaults(),
	}
	add := func(p limits.Policy) {
		ts.items[p.Name] = []string{policyItem(p)}
		if old != nil {
			if prev, ok := old.policy(p.Name); ok && prev == p {
				ts.local[p.Name] = old.local[p.Name]
				return
			}
		}
		ts.local[p.Name] = limits.NewLocal(p)
	}
	if p, ok := t.Admission.Policy("tenant"); ok {
		ts.tenantOnly = []limits.Policy{p}
		ts.tenantPolicy = &ts.tenantOnly[0]
		ts.algorithm = string(p.Algorithm)
		add(p)
	}
	for typ, jt := range t.JobTypes {
		if p, ok := jt.Admission.Policy("type." + typ); ok {
			ts.typePolicies[typ] = p
			add(p)
		}
	}
	ts.maxCost = jobCostBound(maxJobCost, ts.outflow, ts.tenantPolicy)
	for typ, p := range ts.typePolicies {
		ts.typeMaxCost[typ] = jobCostBound(maxJobCost, ts.outflow, ts.tenantPolicy, &p)
	}
	return ts
}

// costBound is the most units one job may cost and what sets it.
type costBound struct {
	max int64
	// policy is the policy whose Capacity sets max; "" when it is not a
	// policy.
	policy string
	// outflow says the tenant's outflow capacity sets max (policy is "").
	outflow bool
}

// maxJobCost is the most units one job of type typ may cost for ts: the
// least of ingest.max_job_cost, the Capacity of every admission policy the
// job is charged to (the tenant's and its type's: a larger job could never
// be admitted), and, when the tenant's outflow is shaped (config.Outflow.Shaped), the
// outflow bucket's capacity (a larger job could never be delivered; the
// drainer sends one it finds queued to the DLQ as cost_exceeds_capacity).
// Ingest refuses a costlier job with a 422 before any Redis call. This is
// the one home of the rule; it is computed once per SetConfig
// (jobCostBound).
func (ts *tenantState) maxJobCost(typ string) costBound {
	if b, ok := ts.typeMaxCost[typ]; ok {
		return b
	}
	return ts.maxCost
}

// jobCostBound computes maxJobCost for a job charged to policies, with
// maxJobCost ingest.max_job_cost (0: config.DefaultMaxJobCost; never above
// config.MaxMaxJobCost) and the tenant's outflow o.
func jobCostBound(maxJobCost int64, o config.Outflow, policies ...*limits.Policy) costBound {
	if maxJobCost <= 0 {
		maxJobCost = config.DefaultMaxJobCost
	}
	b := costBound{max: min(maxJobCost, config.MaxMaxJobCost)}
	for _, p := range policies {
		if p != nil && p.Capacity() < b.max {
			b = costBound{max: max(p.Capacity(), 1), policy: p.Name}
		}
	}
	if o.Shaped() {
		// A job leaves when water + cost <= capacity, so a whole cost fits
		// when it is at most ⌊capacity⌋ (at least 1: config validation
		// requires capacity >= 1).
		if c := math.Floor(o.BucketCapacity()); c < float64(b.max) {
			b = costBound{max: max(int64(c), 1), outflow: true}
		}
	}
	return b
}

// String says what sets b, for a 422's detail.
func (b costBound) String() string {
	switch {
	case b.policy != "":
		return fmt.Sprintf("set by the capacity of admission policy %q, so a costlier job could never be admitted", b.policy)
	case b.outflow:
		return "set by the tenant's outflow capacity, so a costlier job could never be delivered"
	}
	return "set by ingest.max_job_cost"
}

// allPolicies returns the tenant's policies, the tenant's first.
func (ts *tenantState) allPolicies() []limits.Policy {
	var out []limits.Policy
	if ts.tenantPolicy != nil {
		out = append(out, *ts.tenantPolicy)
	}
	for _, p := range ts.typePolicies {
		out = append(out, p)
	}
	return out
}

// policy returns the tenant's policy called name.
func (ts *tenantState) policy(name string) (limits.Policy, bool) {
	if name == "tenant" {
		if ts.tenantPolicy == nil {
			return limits.Policy{}, false
		}
		return *ts.tenantPolicy, true
	}
	p, ok := ts.typePolicies[strings.TrimPrefix(name, "type.")]
	return p, ok && p.Name == name
}

// policyItem is p's member of the RateLimit-Policy field
// (draft-ietf-httpapi-ratelimit-headers-11 §4): the name as an sf-string, the
// quota q = Limit, and the window w = Period in whole seconds, rounded up and
// at least 1 (the draft has no sub-second windows). A gcra or token_bucket
// policy whose burst differs from its limit adds the vendor parameter
// sluice-burst, since its remaining quota r counts up to the burst.
func policyItem(p limits.Policy) string {
	s := strconv.Quote(p.Name) + ";q=" + strconv.FormatInt(p.Limit, 10) +
		";w=" + strconv.FormatInt(max(1, ceilSeconds(p.Period)), 10)
	if c := p.Capacity(); c != p.Limit {
		s += ";sluice-burst=" + strconv.FormatInt(c, 10)
	}
	return s
}
