// Package ingestpeer is the hand-written peer that sluice's ingest is
// measured against (issue 11, requirement 4): the smallest handler a team
// would write instead of running sluice's ingest on Redis.
//
//   - the bearer key picks the tenant (a map read, no Redis);
//   - go-redis/redis_rate's GCRA Allow admits the job (one EVALSHA);
//   - the envelope is LPUSHed onto the tenant's list (one more round trip);
//   - 202 with the job id.
//
// It has no backlog gate, no idempotency, no job state and no backlog counter,
// which sluice's ingest has; it is a floor on cost, not a feature peer. It
// lives here, not in a _test file, so that `make bench` and a person running
// it by hand measure the same code.
package ingestpeer

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Peer is the handler. Construct it with New.
type Peer struct {
	rdb     redis.UniversalClient
	limiter *redis_rate.Limiter
	limit   redis_rate.Limit
	tenants map[string]string // bearer key → tenant
	prefix  string
}

// Config configures a Peer.
type Config struct {
	// Redis is where the limiter's state and the lists live.
	Redis redis.UniversalClient
	// Tenants maps a bearer key to its tenant.
	Tenants map[string]string
	// PerSecond is each tenant's GCRA rate (burst = rate).
	PerSecond int
	// Prefix starts the queue keys (default "peer:"; QueueKey) and the
	// limiter's key names. redis_rate adds its own "rate:" in front of the
	// latter, so the limiter's state lives under "rate:" + Prefix + tenant:
	// a run deletes both patterns to remove its keys.
	Prefix string
}

// New returns the peer handler of cfg.
func New(cfg Config) *Peer {
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = "peer:"
	}
	return &Peer{
		rdb: cfg.Redis, limiter: redis_rate.NewLimiter(cfg.Redis),
		limit: redis_rate.PerSecond(cfg.PerSecond), tenants: cfg.Tenants, prefix: prefix,
	}
}

// QueueKey is the list tenant's jobs are pushed onto.
func (p *Peer) QueueKey(tenant string) string { return p.prefix + "{" + tenant + "}:queue" }

// request is the body the peer accepts: the fields sluice's ingest takes for
// an immediate job.
type request struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
	ID      string          `json:"id"`
}

// envelope is what the peer pushes.
type envelope struct {
	ID         string          `json:"id"`
	Tenant     string          `json:"tenant"`
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	EnqueuedAt time.Time       `json:"enqueued_at"`
}

// ServeHTTP handles POST /v1/jobs; any other path is a 404, another
// method on it a 405.
func (p *Peer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/jobs" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	tenant, ok := p.tenants[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if !ok {
		http.Error(w, "unknown key", http.StatusUnauthorized)
		return
	}
	var req request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	if err := dec.Decode(&req); err != nil || req.Type == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	res, err := p.limiter.Allow(ctx, p.prefix+tenant, p.limit)
	if err != nil {
		http.Error(w, "redis: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if res.Allowed == 0 {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "rate limited", http.StatusTooManyRequests)
		return
	}
	id := req.ID
	if id == "" {
		id = newID()
	}
	env := envelope{ID: id, Tenant: tenant, Type: req.Type, Payload: req.Payload, EnqueuedAt: time.Now().UTC()}
	b, err := json.Marshal(env)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if err := p.rdb.LPush(ctx, p.QueueKey(tenant), b).Err(); err != nil {
		http.Error(w, "redis: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]any{"job_id": id, "tenant": tenant, "enqueued_at": env.EnqueuedAt})
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
