package drainer

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/outflow"
	"github.com/sluicehq/sluice/queue"
)

// Config wires a Drainer. Its zero value is usable but for the two
// required dependencies, Consumer and Redis; every other field documents
// its default, applied by New.
type Config struct {
	// Consumer is the queue's drain side (required).
	Consumer queue.Consumer
	// Redis holds the shared leaky buckets, the adaptive rates and the
	// concurrency semaphores (required).
	Redis redis.UniversalClient
	// Tenants are the configured tenants (outflow and targets); SetTenants
	// replaces them at runtime. Their outflow defaults are config's
	// (config.Outflow.WithDefaults, applied again here to a hand-built one).
	Tenants map[string]config.Tenant
	// Settings is the drainer section of the configuration, a zero field
	// taking config's default: Lease config.DefaultLease (30s), MaxAttempts
	// config.DefaultMaxAttempts (10), BackoffBase and BackoffMax
	// config.DefaultBackoffBase and DefaultBackoffMax (500ms, 5m),
	// ShutdownTimeout config.DefaultDrainerShutdownTimeout (30s); not Listen.
	Settings config.Drainer
	// Handler delivers jobs (default: an HTTPSink to the tenants' targets).
	Handler Handler
	// MaxInFlight bounds the jobs this drainer dispatches at once, across
	// tenants (default DefaultMaxInFlight, 256). Each lane also holds at
	// most one claimed job while it waits for its tenant's concurrency slot
	// and outflow turn, so a drainer holds at most MaxInFlight + number of
	// tenants jobs.
	MaxInFlight int
	// DiscoverUnconfigured also runs lanes for tenants found in the queue
	// backend that are not in Tenants (default false: their jobs wait).
	DiscoverUnconfigured bool
	// Scheduler, when not nil, runs beside the lanes from Run's start to
	// its end (internal/scheduler: moves due scheduled jobs onto the queue),
	// given the configured tenants (default nil: none runs).
	Scheduler Scheduler
	// Logger receives the drainer's logs (nil: slog.Default()).
	Logger *slog.Logger
	// Registerer receives the drainer's metrics (nil: not registered; they
	// still count).
	Registerer prometheus.Registerer
	// Clock is every time of day the drainer reads: deadlines, dead-letter
	// times, latencies (nil: clock.Real). Waits are real timers, and the
	// scripts read Redis TIME.
	Clock clock.Clock
}

// Scheduler is what Config.Scheduler runs: *scheduler.Scheduler.
type Scheduler interface {
	// Run works until ctx is done; tenants returns the configured ones, and
	// moved is called after jobs of tenant were put on its queue.
	Run(ctx context.Context, tenants func() []string, moved func(tenant string)) error
}

// DefaultMaxInFlight is Config.MaxInFlight's default.
const DefaultMaxInFlight = 256

// Drainer drains a queue into the tenants' downstreams. Build it with New,
// run it with Run.
type Drainer struct {
	cfg     Config
	handler Handler
	// needsTarget: the drainer delivers over HTTP (no Handler given), so a
	// tenant without a target URL is held, as a paused one (noTarget).
	needsTarget bool
	tenants     atomic.Pointer[map[string]config.Tenant]
	ids         atomic.Pointer[tenantIDList] // tenantIDs' answer for tenants
	bucket      *outflow.Bucket
	slots       *outflow.Semaphore
	m           *metrics
	log         *slog.Logger
	fails       *failLog // failed deliveries, one line per tenant per failLogEvery
	clock       clock.Clock
	backoff     Backoff
	room        *room     // MaxInFlight's places: one per dispatch in progress or reserved for a take
	sends       sendClock // maps the bucket's clock to this one for shaped sends
	held        heldSet
	ready       atomic.Bool
	sentMu      sync.Mutex
	sent        map[string]*atomic.Int64 // units dispatched per tenant, for the measured rate
	units       outflowCounts            // units started per tenant and second, for keys.Outflow
	stopping    atomic.Bool
	starts      *lua.Group                    // delivery-start records, in shared pipelines
	wake        chan struct{}                 // SetTenants asks Run to start lanes at once
	changed     atomic.Pointer[chan struct{}] // closed and replaced by SetTenants
	arrivals    sync.Map                      // tenant → *laneWake of its lane's first loop (jobsArrived)
	refused     sync.Map                      // tenant → time.Time of its first take refused since its last turn
}

// New checks cfg, fills its defaults and returns a Drainer. A missing
// Consumer or Redis is an error naming the field.
func New(cfg Config) (*Drainer, error) {
	switch {
	case cfg.Consumer == nil:
		return nil, errors.New("drainer: new: Consumer is required")
	case cfg.Redis == nil:
		return nil, errors.New("drainer: new: Redis is required")
	}
	withDefaults(&cfg)
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := cfg.Settings
	d := &Drainer{
		cfg:     cfg,
		bucket:  outflow.NewBucket(cfg.Redis),
		slots:   outflow.NewSemaphore(cfg.Redis),
		m:       m,
		log:     cfg.Logger,
		fails:   newFailLog(cfg.Logger, cfg.Clock),
		clock:   cfg.Clock,
		backoff: Backoff{Base: s.BackoffBase, Max: s.BackoffMax},
		room:    newRoom(cfg.MaxInFlight),
		held:    heldSet{byTenant: map[string]map[*queue.Claimed]bool{}},
		sent:    map[string]*atomic.Int64{},
		starts:  lua.NewGroup(cfg.Redis, startPipelines, startTimeout),
		wake:    make(chan struct{}, 1),
	}
	d.sends.gauge = m.sendOffset
	d.needsTarget = cfg.Handler == nil
	d.SetTenants(cfg.Tenants)
	d.handler = cfg.Handler
	if d.handler == nil {
		sink := NewHTTPSink(nil, d.Target)
		sink.clock = d.clock
		d.handler = sink
	}
	return d, nil
}

// withDefaults fills cfg's zero fields with their defaults (Config).
func withDefaults(cfg *Config) {
	s := &cfg.Settings
	if s.Lease <= 0 {
		s.Lease = config.DefaultLease
	}
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = config.DefaultMaxAttempts
	}
	if s.ShutdownTimeout <= 0 {
		s.ShutdownTimeout = config.DefaultDrainerShutdownTimeout
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Clock = clock.Or(cfg.Clock)
}

// SetTenants replaces the configured tenants (a config reload or a runtime
// change from tenants.Registry). Running lanes see the new outflow and
// targets at their next job, and a job already waiting for its concurrency
// slot or outflow turn (or retrying a failing bucket) asks again at once with
// the new outflow; a new tenant gets its lane at once; the lane of
// a removed tenant stops claiming (unless DiscoverUnconfigured), leaving its
// queued jobs for when the tenant comes back; a paused tenant's lane stops
// claiming and starting deliveries, and a resumed one claims again at once
// (pause.go).
//
// The drainer keeps t itself, not a copy (a 10,000-tenant map is megabytes),
// and never modifies it; the caller must not modify it afterwards either
// (tenants.Registry's configs are read-only once built).
func (d *Drainer) SetTenants(t map[string]config.Tenant) {
	if t == nil {
		t = map[string]config.Tenant{}
	}
	prev := d.tenants.Swap(&t)
	if prev != nil {
		for id := range *prev {
			if _, ok := t[id]; !ok {
				d.m.forget(id)
			}
		}
	}
	d.warnNoTarget(prev, t)
	d.m.paused.Set(t)
	next := make(chan struct{})
	if old := d.changed.Swap(&next); old != nil {
		close(*old)
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// tenantsChanged returns a channel closed at the next SetTenants. Take it
// before reading the configuration, so a change after the read is not
// missed.
func (d *Drainer) tenantsChanged() <-chan struct{} { return *d.changed.Load() }

func (d *Drainer) tenant(id string) (config.Tenant, bool) {
	t, ok := (*d.tenants.Load())[id]
	return t, ok
}

// tenantIDs returns the configured tenants' ids, sorted. The slice is
// built once per configuration (SetTenants) and shared: callers read it
// and never write to it; its capacity is its length, so an append copies.
// Sorted and stable, it lets the prober reuse what it built for the same
// list (redisq's probe keys) instead of building it every second.
func (d *Drainer) tenantIDs() []string {
	p := d.tenants.Load()
	if c := d.ids.Load(); c != nil && c.from == p {
		return c.ids
	}
	ids := slices.Sorted(maps.Keys(*p))
	ids = slices.Clip(ids)
	d.ids.Store(&tenantIDList{from: p, ids: ids})
	return ids
}

// tenantIDList is the sorted ids of one configuration (Drainer.tenantIDs).
type tenantIDList struct {
	from *map[string]config.Tenant
	ids  []string
}

// label is the tenant's metric label: its id when configured, else
// "_other", so label sets stay bounded.
func (d *Drainer) label(id string) string {
	if _, ok := d.tenant(id); ok {
		return id
	}
	return otherTenant
}

// Target returns the target of a tenant's job type (the type's when it has
// a URL, else the tenant's), from the current configuration. It is the
// default HTTPSink's TargetFunc.
func (d *Drainer) Target(tenant, jobType string) (config.Target, bool) {
	t, ok := d.tenant(tenant)
	if !ok {
		return config.Target{}, false
	}
	if jt, ok := t.JobTypes[jobType]; ok && jt.Target.URL != "" {
		return jt.Target, true
	}
	return t.Target, t.Target.URL != ""
}

// Ready reports whether Run has started and is not stopping (for /readyz).
func (d *Drainer) Ready() bool { return d.ready.Load() && !d.stopping.Load() }

// discoverEvery is how often the drainer looks for tenants to start lanes for.
const discoverEvery = 2 * time.Second

// Run drains until ctx is done, then shuts down in this order:
//  1. lanes stop claiming; a job a lane holds before dispatch is released
//     to the head of its queue;
//  2. dispatches in flight may finish until Settings.ShutdownTimeout;
//  3. at the deadline the rest are cancelled and their jobs released
//     (delivered again later: at least once);
//  4. the lease keeper, the reaper, the samplers (a last outflow flush) and
//     the scheduler stop (a move in progress finishes or is retaken later).
//
// Run returns nil after a clean shutdown, or an error when shutdown missed
// its deadline by more than a few seconds (a backend hanging).
func (d *Drainer) Run(ctx context.Context) error {
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	bgCtx, cancelBg := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBg()

	calCtx, cancelCal := context.WithTimeout(ctx, time.Second)
	if offset, n := d.sends.calibrate(calCtx, d.cfg.Redis); n > 0 {
		d.log.Info("send clock calibrated: shaped jobs go at their turn on Redis' clock + offset + margin",
			"offset", offset.String(), "margin", sendMargin.String(), "samples", n)
	}
	cancelCal()
	ls := newLaneSet(ctx, workCtx, d)
	var bg sync.WaitGroup
	bg.Add(3)
	go func() { defer bg.Done(); d.keepLeases(bgCtx) }()
	go func() { defer bg.Done(); d.measure(bgCtx) }()
	go func() { defer bg.Done(); d.sampleDepth(ctx) }()
	if ls.prober == nil {
		bg.Add(1)
		go func() { defer bg.Done(); d.reap(ctx) }() // else discover reaps what the probe finds
	}
	if sc := d.cfg.Scheduler; sc != nil {
		bg.Add(1)
		go func() { defer bg.Done(); _ = sc.Run(bgCtx, d.tenantIDs, d.jobsArrived) }()
	}

	ls.discover()
	d.ready.Store(true)
	tick := time.NewTicker(ls.every())
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			ls.discover()
		case <-d.wake:
			ls.discover()
		}
	}
	tick.Stop()
	d.stopping.Store(true)
	d.log.Info("drainer stopping", "shutdown_timeout", d.cfg.Settings.ShutdownTimeout.String())
	err := d.awaitLanes(ls, cancelWork)
	cancelBg()
	bg.Wait()
	d.log.Info("drainer stopped")
	return err
}

// awaitLanes waits for the lanes and their dispatches to end, until
// Settings.ShutdownTimeout; then it cancels the dispatches (cancelWork) and
// waits 5 s more, after which it returns an error.
func (d *Drainer) awaitLanes(ls *laneSet, cancelWork func()) error {
	deadline := time.NewTimer(d.cfg.Settings.ShutdownTimeout)
	defer deadline.Stop()
	lanesDone := make(chan struct{})
	go func() { ls.lanes.Wait(); ls.dispatches.Wait(); close(lanesDone) }()
	select {
	case <-lanesDone:
		return nil
	case <-deadline.C:
	}
	d.log.Warn("drainer shutdown deadline reached; cancelling deliveries in flight")
	cancelWork()
	select {
	case <-lanesDone:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("drainer: shutdown: deliveries did not return 5s after the deadline")
	}
}
