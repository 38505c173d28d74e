package drainer

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// Config wires a Drainer. Consumer and Redis are required.
type Config struct {
	// Consumer is the queue's drain side.
	Consumer queue.Consumer
	// Redis holds the shared leaky buckets, the adaptive rates and the
	// concurrency semaphores.
	Redis redis.UniversalClient
	// Tenants are the configured tenants (outflow and targets); SetTenants
	// replaces them at runtime.
	Tenants map[string]config.Tenant
	// Settings is the drainer section of the configuration: Lease,
	// MaxAttempts (default 10), BackoffBase/BackoffMax, ShutdownTimeout
	// (default 30s).
	Settings config.Drainer
	// Handler delivers jobs (default: an HTTPSink to the tenants' targets).
	Handler Handler
	// MaxInFlight bounds the jobs this drainer dispatches at once, across
	// tenants (default 256). Each lane also holds at most one claimed job
	// while it waits for its tenant's outflow slot, so a drainer holds at
	// most MaxInFlight + number of tenants jobs.
	MaxInFlight int
	// DiscoverUnconfigured also runs lanes for tenants found in the queue
	// backend that are not in Tenants (default false: their jobs wait).
	DiscoverUnconfigured bool
	// Logger receives the drainer's logs (default slog.Default()).
	Logger *slog.Logger
	// Registerer receives the drainer's metrics (nil: not registered).
	Registerer prometheus.Registerer
}

// Drainer drains a queue into the tenants' downstreams. Build it with New,
// run it with Run.
type Drainer struct {
	cfg      Config
	handler  Handler
	tenants  atomic.Pointer[map[string]config.Tenant]
	leaky    *limits.Leaky
	m        *metrics
	log      *slog.Logger
	backoff  Backoff
	slots    chan struct{}
	held     heldSet
	ready    atomic.Bool
	sentMu   sync.Mutex
	sent     map[string]*atomic.Int64 // units dispatched per tenant, for the measured rate
	stopping atomic.Bool
	starts   *lua.Group                    // delivery-start records, in shared pipelines
	wake     chan struct{}                 // SetTenants asks Run to start lanes at once
	changed  atomic.Pointer[chan struct{}] // closed and replaced by SetTenants
}

// New checks cfg, fills its defaults and returns a Drainer.
func New(cfg Config) (*Drainer, error) {
	if cfg.Consumer == nil || cfg.Redis == nil {
		return nil, errors.New("drainer: new: Consumer and Redis are required")
	}
	s := &cfg.Settings
	if s.Lease <= 0 {
		s.Lease = 30 * time.Second
	}
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = 10
	}
	if s.ShutdownTimeout <= 0 {
		s.ShutdownTimeout = 30 * time.Second
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	d := &Drainer{
		cfg:     cfg,
		leaky:   limits.NewLeaky(cfg.Redis),
		m:       m,
		log:     cfg.Logger,
		backoff: Backoff{Base: s.BackoffBase, Max: s.BackoffMax},
		slots:   make(chan struct{}, cfg.MaxInFlight),
		held:    heldSet{byTenant: map[string]map[*queue.Claimed]bool{}},
		sent:    map[string]*atomic.Int64{},
		starts:  lua.NewGroup(cfg.Redis, startPipelines, startTimeout),
		wake:    make(chan struct{}, 1),
	}
	d.SetTenants(cfg.Tenants)
	d.handler = cfg.Handler
	if d.handler == nil {
		d.handler = NewHTTPSink(nil, d.Target)
	}
	return d, nil
}

// SetTenants replaces the configured tenants (a config reload or a runtime
// change from tenants.Registry). Running lanes see the new outflow and
// targets at their next job, and a job already waiting for its outflow or
// concurrency slot (or retrying a failing bucket) asks again at once with
// the new outflow; a new tenant gets its lane at once; the lane of
// a removed tenant stops claiming (unless DiscoverUnconfigured), leaving its
// queued jobs for when the tenant comes back.
func (d *Drainer) SetTenants(t map[string]config.Tenant) {
	cp := make(map[string]config.Tenant, len(t))
	for k, v := range t {
		cp[k] = v
	}
	d.tenants.Store(&cp)
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
//  4. the lease keeper, the reaper and the samplers stop.
//
// Run returns nil after a clean shutdown, or an error when shutdown missed
// its deadline by more than a few seconds (a backend hanging).
func (d *Drainer) Run(ctx context.Context) error {
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	bgCtx, cancelBg := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBg()

	var lanes, dispatches, bg sync.WaitGroup
	bg.Add(4)
	go func() { defer bg.Done(); d.keepLeases(bgCtx) }()
	go func() { defer bg.Done(); d.reap(ctx) }()
	go func() { defer bg.Done(); d.measure(ctx) }()
	go func() { defer bg.Done(); d.sampleDepth(ctx) }()

	// started holds the tenants with a lane. A lane retires itself under
	// startedMu when its tenant is no longer configured, so discovery sees
	// either the lane or its absence, never a lane about to stop.
	var startedMu sync.Mutex
	started := map[string]bool{}
	retire := func(t string) bool {
		if d.cfg.DiscoverUnconfigured {
			return false
		}
		startedMu.Lock()
		defer startedMu.Unlock()
		if _, ok := d.tenant(t); ok {
			return false
		}
		delete(started, t)
		return true
	}
	discover := func() {
		tenants := d.laneTenants(ctx)
		startedMu.Lock()
		defer startedMu.Unlock()
		for _, t := range tenants {
			if started[t] {
				continue
			}
			started[t] = true
			lanes.Add(1)
			go func() {
				defer lanes.Done()
				d.lane(ctx, workCtx, t, &dispatches, retire)
			}()
		}
	}
	discover()
	d.ready.Store(true)
	tick := time.NewTicker(discoverEvery)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			discover()
		case <-d.wake:
			discover()
		}
	}
	tick.Stop()
	d.stopping.Store(true)
	d.log.Info("drainer stopping", "shutdown_timeout", d.cfg.Settings.ShutdownTimeout.String())

	deadline := time.NewTimer(d.cfg.Settings.ShutdownTimeout)
	defer deadline.Stop()
	lanesDone := make(chan struct{})
	go func() { lanes.Wait(); dispatches.Wait(); close(lanesDone) }()
	var err error
	select {
	case <-lanesDone:
	case <-deadline.C:
		d.log.Warn("drainer shutdown deadline reached; cancelling deliveries in flight")
		cancelWork()
		select {
		case <-lanesDone:
		case <-time.After(5 * time.Second):
			err = errors.New("drainer: shutdown: deliveries did not return 5s after the deadline")
		}
	}
	cancelBg()
	bg.Wait()
	d.log.Info("drainer stopped")
	return err
}

// laneTenants returns the configured tenants, plus those the backend knows
// when DiscoverUnconfigured is set.
func (d *Drainer) laneTenants(ctx context.Context) []string {
	var out []string
	for t := range *d.tenants.Load() {
		out = append(out, t)
	}
	if d.cfg.DiscoverUnconfigured {
		more, err := d.cfg.Consumer.Tenants(ctx)
		if err != nil {
			d.m.errors.WithLabelValues("tenants").Inc()
			d.log.Warn("drainer: list tenants", "err", err)
		}
		out = append(out, more...)
	}
	sort.Strings(out)
	return out
}

// sentCounter returns the tenant's dispatched-units counter.
func (d *Drainer) sentCounter(tenant string) *atomic.Int64 {
	d.sentMu.Lock()
	defer d.sentMu.Unlock()
	c, ok := d.sent[tenant]
	if !ok {
		c = new(atomic.Int64)
		d.sent[tenant] = c
	}
	return c
}

// measureEvery is the window of sluice_outflow_measured_rate.
const measureEvery = 5 * time.Second

// measure publishes each tenant's dispatched units per second over the last
// window until ctx is done.
func (d *Drainer) measure(ctx context.Context) {
	last := map[string]int64{}
	tick := time.NewTicker(measureEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		d.sentMu.Lock()
		for t, c := range d.sent {
			n := c.Load()
			d.m.measured.WithLabelValues(d.label(t)).Set(float64(n-last[t]) / measureEvery.Seconds())
			last[t] = n
		}
		d.sentMu.Unlock()
	}
}

// sleepOrChange waits d, or until ctx is done or changed closes (the
// tenants were replaced); it reports whether ctx is still live.
func sleepOrChange(ctx context.Context, d time.Duration, changed <-chan struct{}) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-t.C:
	}
	return ctx.Err() == nil
}

// sleep waits d or until ctx is done; it reports whether ctx is still live
// (the full d passed).
func sleep(ctx context.Context, d time.Duration) bool { return sleepOrChange(ctx, d, nil) }
