package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/limits"
)

// Fallbacks for settings a config built without config.Load may leave at
// zero; config.Load applies the same defaults, so they only matter in tests
// and embedders that fill config.Config by hand.
const (
	fallbackMaxBody      = 1 << 20
	fallbackMaxBatch     = 1000
	fallbackShutdown     = 10 * time.Second
	fallbackRetryAfter   = time.Second
	fallbackRedisTimeout = 250 * time.Millisecond

	fallbackReadHeaderTimeout = 10 * time.Second
	fallbackBodyTimeout       = 30 * time.Second
	fallbackWriteTimeout      = 10 * time.Second
	fallbackIdleTimeout       = 2 * time.Minute
	fallbackMaxHeaderBytes    = 64 << 10
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
	maxBody      int64
	maxBatch     int
	retryAfter   time.Duration
	redisTimeout time.Duration
	shutdown     time.Duration
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
	// invalid lists policies the limiter will refuse (limits.Policy.Validate
	// is stricter than config validation: period >= limit µs and such);
	// SetConfig logs them, and their tenants' requests meet the limiter
	// error path (fail open or 503).
	invalid []error
}

// tenantState is one tenant's precomputed admission inputs.
type tenantState struct {
	name string
	// allowOnError is on_limiter_error == "allow" (fail open).
	allowOnError bool
	// tenantPolicy is the tenant-wide policy (name "tenant"), nil when the
	// tenant has no admission algorithm.
	tenantPolicy *limits.Policy
	// typePolicies holds the policy (name "type.<type>") of each job type
	// that has an admission algorithm.
	typePolicies map[string]limits.Policy
	// items holds each policy's RateLimit-Policy list member, by policy name.
	items map[string]string
	// local holds the in-process fail-open limiter of each policy.
	local map[string]*limits.Local
	// algorithm is the metric label of the tenant's decisions: the tenant
	// policy's algorithm, or "none".
	algorithm string
	// maxBacklog and outflowRate are the backlog gate's inputs.
	maxBacklog  int64
	outflowRate float64
	// outflow is the tenant's outflow configuration, for the stats API
	// (visibility_stats.go).
	outflow config.Outflow
}

// newSnapshot precomputes cfg for the request path. old, when not nil, is the
// snapshot being replaced: its fail-open limiters are kept for policies that
// did not change, so a reload does not hand every tenant a fresh burst.
func newSnapshot(cfg *config.Config, old *snapshot) *snapshot {
	s := &snapshot{
		byKey:        map[[sha256.Size]byte]*tenantState{},
		tenants:      map[string]*tenantState{},
		maxBody:      orDefault(cfg.Ingest.MaxBodyBytes, fallbackMaxBody),
		maxBatch:     int(orDefault(int64(cfg.Ingest.MaxBatchJobs), fallbackMaxBatch)),
		retryAfter:   orDefault(cfg.Ingest.RetryAfter, fallbackRetryAfter),
		redisTimeout: orDefault(cfg.Redis.Timeout, fallbackRedisTimeout),
		shutdown:     orDefault(cfg.Ingest.ShutdownTimeout, fallbackShutdown),

		bodyTimeout:       orDefault(cfg.Ingest.BodyTimeout, fallbackBodyTimeout),
		writeTimeout:      orDefault(cfg.Ingest.WriteTimeout, fallbackWriteTimeout),
		readHeaderTimeout: orDefault(cfg.Ingest.ReadHeaderTimeout, fallbackReadHeaderTimeout),
		idleTimeout:       orDefault(cfg.Ingest.IdleTimeout, fallbackIdleTimeout),
		maxHeaderBytes:    int(orDefault(int64(cfg.Ingest.MaxHeaderBytes), fallbackMaxHeaderBytes)),

		backend:      cfg.Queue.Backend,
		listen:       cfg.Ingest.Listen,
		kafkaBrokers: cfg.Kafka.Brokers,
		kafkaTopic:   cfg.Kafka.Topic,
	}
	if s.backend == "" {
		s.backend = "redis"
	}
	for name, t := range cfg.Tenants {
		var prev *tenantState
		if old != nil {
			prev = old.tenants[name]
		}
		ts := newTenantState(name, t, prev)
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

func newTenantState(name string, t config.Tenant, old *tenantState) *tenantState {
	ts := &tenantState{
		name:         name,
		allowOnError: t.OnLimiterError != "deny",
		typePolicies: map[string]limits.Policy{},
		items:        map[string]string{},
		local:        map[string]*limits.Local{},
		algorithm:    "none",
		maxBacklog:   t.Outflow.MaxBacklog,
		outflowRate:  t.Outflow.Rate,
		outflow:      t.Outflow,
	}
	add := func(p limits.Policy) {
		ts.items[p.Name] = policyItem(p)
		if old != nil {
			if prev, ok := old.policy(p.Name); ok && prev == p {
				ts.local[p.Name] = old.local[p.Name]
				return
			}
		}
		ts.local[p.Name] = limits.NewLocal(p)
	}
	if p, ok := policyOf("tenant", t.Admission); ok {
		ts.tenantPolicy = &p
		ts.algorithm = string(p.Algorithm)
		add(p)
	}
	for typ, jt := range t.JobTypes {
		if p, ok := policyOf("type."+typ, jt.Admission); ok {
			ts.typePolicies[typ] = p
			add(p)
		}
	}
	return ts
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

// policyOf converts a configured admission policy; ok is false when the
// policy has no algorithm (no limit).
func policyOf(name string, a config.Admission) (limits.Policy, bool) {
	if a.Algorithm == "" {
		return limits.Policy{}, false
	}
	burst := a.Burst
	if burst == 0 {
		burst = a.Limit
	}
	period := a.Period
	if period == 0 {
		period = time.Second
	}
	return limits.Policy{
		Name:      name,
		Algorithm: limits.Algorithm(a.Algorithm),
		Limit:     a.Limit,
		Period:    period,
		Burst:     burst,
	}, true
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

func orDefault[T int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
