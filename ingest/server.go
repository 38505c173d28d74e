// Package ingest is sluice's HTTP API: it authenticates a tenant's job
// submissions, admits or refuses them against the tenant's limits in Redis
// (one EVALSHA per request), and answers 202 only once the jobs are durable
// on the queue backend.
//
// Routes:
//
//	POST /v1/jobs        one job: {"type", "payload", "id"?, "deadline"?, "cost"?}
//	GET  /v1/jobs        a page of the tenant's jobs in one state (joblist.go)
//	POST /v1/jobs:batch  {"jobs": [...]}, admitted as one request of cost N
//	GET  /healthz        200 while the process runs
//	GET  /readyz         200 when Redis and the queue backend answer
//	GET  /metrics        Prometheus metrics (when a Gatherer is given)
//	GET  /ui/            the web console (ui.go), with its admin routes
//	                     /admin/v1/overview and /admin/v1/tenants/{id}/history
//	/admin/v1/tenants…   the admin API (admin.go), with Config.Tenants and
//	                     ingest.admin_tokens
//	GET    /v1/jobs/{id}            a job's state, queue position and ETA
//	DELETE /v1/jobs/{id}            cancel a waiting job
//	GET    /v1/tenants/{id}/stats   a tenant's backlog, rates, water level, ETA
//	                     (visibility.go: a tenant key, or an admin token)
//
// A Server is made of small parts, one file each: auth (API key → tenant),
// decode (body → validated jobs), idempotency (client ids), admission
// (limits and fail-open), enqueue (envelopes → producer), headers (RateLimit
// fields) and errors (problem+json). docs/adr/0004-ingest-api.md records the
// choices.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/depth"
	"github.com/sluicehq/sluice/internal/pausedgauge"
	"github.com/sluicehq/sluice/internal/quietlog"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/tenants"
)

// Config is a Server's settings and dependencies. Settings, Redis, Producer
// and Admitter are required; every other field has a usable zero value.
type Config struct {
	// Settings is the initial configuration (tenants, keys, limits, the
	// ingest section); SetConfig replaces it later. A zero ingest setting
	// (a config.Config built by hand) means its default, as in a loaded
	// file (config/defaults.go).
	Settings *config.Config
	// Redis holds the idempotency keys and answers /readyz's PING. It
	// should bound every command by cfg.Redis.Timeout (cmd/ingest sets
	// its Read/Write/DialTimeout), so a dead Redis fails fast.
	Redis redis.UniversalClient
	// Producer makes jobs durable. Run closes it after the HTTP server has
	// shut down.
	Producer queue.Producer
	// Admitter decides admission (*limits.Admitter, already loaded).
	Admitter Admitter
	// Tenants, when set, serves the admin API (/admin/v1/tenants, see
	// admin.go) for the admins of ingest.admin_tokens. Its Run should call
	// SetConfig with every merged config. Default: no admin API (404).
	Tenants *tenants.Registry
	// Logger receives request errors that are not the client's fault.
	// Default: slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics. Default: none registered (they
	// still count).
	Registerer prometheus.Registerer
	// Gatherer, when set, is served on GET /metrics. Default: Registerer,
	// when it is also a Gatherer (a *prometheus.Registry is); none.
	Gatherer prometheus.Gatherer
	// Clock is the time of day of deadlines, enqueued_at, the fail-open
	// limiters and admin audit entries. Default: clock.Real. When set, it
	// is also the instant given to the scripts (limits.Request.Now,
	// limits.RescaleGCRA); when nil they get zero and read Redis TIME, the
	// clock every instance shares.
	Clock clock.Clock
}

// Server is the ingest HTTP service. It is safe for concurrent use; the
// configuration can be swapped at any time with SetConfig.
type Server struct {
	rdb      redis.UniversalClient
	producer queue.Producer
	admitter Admitter
	log      *slog.Logger
	quiet    *quietlog.Log // per-request warnings that repeat while a backend is down (warnRepeat)
	clock    clock.Clock
	// scriptClock is Config.Clock: nil (Redis TIME) unless a test set one.
	scriptClock clock.Clock
	metrics     *metrics
	gatherer    prometheus.Gatherer
	handler     http.Handler
	registry    *tenants.Registry
	admin       *adminMetrics
	dlqMetrics  *dlqMetrics
	admins      atomic.Pointer[adminIndex]

	snap     atomic.Pointer[snapshot]
	draining atomic.Bool
	// admissions and paused back the stats' admission rates and
	// sluice_outflow_paused (admission_rate.go).
	admissions *admissionCounts
	paused     *pausedgauge.Gauge
}

// New returns a Server. It fails, naming the field, when a required one is
// missing, or when the metrics cannot be registered (registered twice on
// one Registerer).
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Settings == nil:
		return nil, errors.New("ingest: new: Config.Settings is required")
	case cfg.Redis == nil:
		return nil, errors.New("ingest: new: Config.Redis is required")
	case cfg.Producer == nil:
		return nil, errors.New("ingest: new: Config.Producer is required")
	case cfg.Admitter == nil:
		return nil, errors.New("ingest: new: Config.Admitter is required")
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	am, err := newAdminMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	dm, err := newDLQMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{
		rdb:         cfg.Redis,
		producer:    cfg.Producer,
		admitter:    cfg.Admitter,
		log:         cfg.Logger,
		quiet:       quietlog.New(cfg.Logger, cfg.Clock, repeatLogEvery),
		clock:       clock.Or(cfg.Clock),
		scriptClock: cfg.Clock,
		metrics:     m,
		gatherer:    cfg.Gatherer,
		registry:    cfg.Tenants,
		admin:       am,
		admissions:  newAdmissionCounts(),
		paused:      pausedgauge.New(),
		dlqMetrics:  dm,
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.paused.Vec); err != nil {
			return nil, fmt.Errorf("ingest: register metrics: %w", err)
		}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.gatherer == nil {
		s.gatherer, _ = cfg.Registerer.(prometheus.Gatherer)
	}
	s.SetConfig(cfg.Settings)
	s.handler = s.routes()
	return s, nil
}

// SetConfig swaps the configuration atomically: requests that started
// before keep the old tenants, keys and limits, later ones see the new. The
// key index and every tenant's policies are computed here, once, not per
// request. cfg must be valid (config.Load validates) and is not modified.
// Settings of the listener itself (ingest.listen) apply at the next Run.
func (s *Server) SetConfig(cfg *config.Config) {
	snap := newSnapshot(cfg, s.snap.Load())
	for _, err := range snap.invalid {
		s.log.Error("ingest: admission policy the limiter refuses; its requests take the limiter error path", "err", err)
	}
	s.snap.Store(snap)
	s.paused.Set(cfg.Tenants)
	admins := newAdminIndex(cfg)
	s.admins.Store(&admins)
}

// Handler returns the HTTP handler of all routes, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	route := func(pattern, name string, h http.HandlerFunc) {
		mux.Handle(pattern, s.metrics.instrument(name, s.armed(h)))
	}
	route("/v1/jobs", "jobs", s.submitRoute)
	s.jobRoutes(route)
	route("/v1/jobs:batch", "jobs_batch", s.post(s.handleBatch))
	route("GET /healthz", "healthz", s.handleHealthz)
	route("GET /readyz", "readyz", s.handleReadyz)
	s.adminRoutes(route)
	s.dlqRoutes(route)
	s.heartbeatRoutes(route)
	s.uiRoutes(route)
	route("/v1/jobs/{id}", "job", s.handleJobState)
	route("/v1/tenants/{id}/stats", "stats", s.handleStats)
	if s.gatherer != nil {
		mux.Handle("GET /metrics", s.metrics.instrument("metrics", s.armed(
			promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)}).ServeHTTP)))
	}
	route("/", "other", noRoute)
	return mux
}

// armed gives every answer ingest.write_timeout from the start of its
// handler, from the config current then (http.Server.WriteTimeout, the
// value at Serve, covers what net/http writes itself). Routes with a body
// move the deadline once it is read (armBody); admin answers get more.
//
// An answer given with the body unread is sent at once and closes the
// connection, after the rest of the body is read within bounds (linger.go).
func (s *Server) armed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		snap := s.snap.Load()
		armWrite(w, snap, 0)
		answerFirst(w, r, snap.bodyTimeout, h)
	}
}

// post answers 405 (as problem+json, with Allow) to anything but POST.
func (s *Server) post(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeProblem(w, newProblem(http.StatusMethodNotAllowed, "", r.Method+" is not allowed here; use POST"))
			return
		}
		h(w, r)
	}
}

// Run listens on cfg.Ingest.Listen and serves until ctx is done, then shuts
// down as Serve does.
func (s *Server) Run(ctx context.Context) error {
	addr := s.snap.Load().listen
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("ingest: listen on %s: %w", addr, err)
	}
	s.log.Info("ingest listening", "addr", ln.Addr().String())
	return s.Serve(ctx, ln)
}

// Serve serves HTTP on ln until ctx is done, then shuts down in this order:
//
//  1. /readyz answers 503, so a load balancer stops sending;
//  2. http.Server.Shutdown closes the listener (new connections are
//     refused) and idle connections, and waits for in-flight requests to
//     finish, at most cfg.Ingest.ShutdownTimeout (then they are cut);
//  3. Producer.Close flushes what the producer still holds, after the last
//     request that could use it has finished.
//
// It returns nil after a clean shutdown, or the error that stopped serving.
// The Redis client belongs to the caller and stays open.
//
// Every client is bounded (the ingest.* keys, as they are when Serve
// starts; body_timeout and write_timeout are read again by each request):
// its request line and headers must arrive within read_header_timeout and
// fit in max_header_bytes (net/http answers 431 itself), its body within
// body_timeout (408, body.go), its answer must be taken within
// write_timeout (the connection is closed), and a keep-alive connection
// waits idle_timeout for its next request. ReadTimeout, the whole request's
// bound, is read_header_timeout + body_timeout, so a body that no handler
// reads (net/http discards it) is bounded too.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	snap := s.snap.Load()
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: snap.readHeaderTimeout,
		ReadTimeout:       snap.readHeaderTimeout + snap.bodyTimeout,
		WriteTimeout:      snap.writeTimeout,
		IdleTimeout:       snap.idleTimeout,
		MaxHeaderBytes:    snap.maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	// The backlog gauge, so the backlog alert holds when no drainer runs.
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); s.sampleDepth(sampleCtx) }()
	// The admission counts, flushed once more after the last request.
	flushed := make(chan struct{})
	go func() { defer close(flushed); s.runAdmissionFlush(sampleCtx) }()
	defer func() { stopSampling(); <-sampled; <-flushed }()

	var serveErr error
	select {
	case err := <-errc:
		serveErr = fmt.Errorf("ingest: serve: %w", err)
	case <-ctx.Done():
	}
	// Step 1: not ready any more.
	s.draining.Store(true)
	// Step 2: stop intake, drain in-flight requests.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.snap.Load().shutdown)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		serveErr = errors.Join(serveErr, fmt.Errorf("ingest: shutdown: %w", err))
		_ = hs.Close()
	}
	// Step 3: close the producer.
	if err := s.producer.Close(); err != nil {
		serveErr = errors.Join(serveErr, fmt.Errorf("ingest: close producer: %w", err))
	}
	return serveErr
}

// scriptNow is the instant given to a script: zero (the script reads Redis
// TIME, so instances with skewed clocks agree) unless Config.Clock was set.
func (s *Server) scriptNow() time.Time {
	if s.scriptClock == nil {
		return time.Time{}
	}
	return s.scriptClock.Now()
}

// sampleDepth sets sluice_queue_depth{tenant} for every configured tenant
// (internal/depth) every depth.Every until ctx ends. A counter that cannot
// be read keeps its series' last value and is logged at Debug (a Redis
// outage shows in every other answer already).
func (s *Server) sampleDepth(ctx context.Context) {
	d := depth.Sampler{Redis: s.rdb, Gauge: s.metrics.depth}
	d.Run(ctx, func() []string {
		snap := s.snap.Load()
		tenants := make([]string, 0, len(snap.tenants))
		for t := range snap.tenants {
			tenants = append(tenants, t)
		}
		return tenants
	}, func(n int) { s.log.Debug("ingest: backlog counters not read for sluice_queue_depth", "tenants", n) })
}
