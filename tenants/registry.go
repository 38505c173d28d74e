package tenants

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
)

// Update sources, the values of sluice_registry_updates_total's label.
const (
	SourcePubSub = "pubsub" // a message on keys.TenantsChannel (or a resubscribe)
	SourcePoll   = "poll"   // the version poll, the periodic resync or Sync
	SourceFile   = "file"   // a new configuration file (SetBase)
	SourceLocal  = "local"  // Refresh after this process's own admin write
)

// Defaults of RegistryConfig.
const (
	// DefaultPollEvery is RegistryConfig.PollEvery's default.
	DefaultPollEvery = 500 * time.Millisecond
	// DefaultResyncEvery is RegistryConfig.ResyncEvery's default.
	DefaultResyncEvery = 30 * time.Second
)

// RegistryConfig configures a Registry. Redis and Base are required; the
// other fields' zero values are the defaults.
type RegistryConfig struct {
	// Redis holds the runtime records and carries the Pub/Sub subscription.
	// Required.
	Redis redis.UniversalClient
	// Base is the configuration file's config; SetBase replaces it.
	// Required.
	Base *config.Config
	// Store reads the runtime records (nil: a Store on Redis).
	Store *Store
	// Logger receives changes and errors (nil: slog.Default()).
	Logger *slog.Logger
	// Registerer receives the registry's metrics (nil: none; they still
	// count).
	Registerer prometheus.Registerer
	// PollEvery is how often the global version counter is read (0:
	// DefaultPollEvery), so a change whose message was lost lands within
	// PollEvery plus one read.
	PollEvery time.Duration
	// ResyncEvery is how often every record is read whatever the counter
	// says (0: DefaultResyncEvery), for a change stored but never announced.
	ResyncEvery time.Duration
}

// Registry is one process's view of the tenants: the configuration file's
// (the base) with the runtime records of the Store laid over them (Merge).
// Every change of either — a Pub/Sub message, a moved version counter, a
// periodic resync, a new file (SetBase) — re-merges; a merged config that
// differs from the current one and passes config.Validate is published to
// Config and handed to the apply function given to Run. A merged config that
// fails validation (a runtime tenant's key now also in the file, or held by
// two runtime tenants) is logged and counted in
// sluice_registry_errors_total{reason="invalid"}, and applied settled
// (quarantine): a key held twice is taken from the tenant that took it, a
// tenant's own problem is applied as stored. Only a problem outside the
// tenants keeps the whole running config. A Redis error keeps the running config too
// (reason="read"); admin changes are never dropped because Redis was away.
//
// It is safe for concurrent use.
type Registry struct {
	store       *Store
	rdb         redis.UniversalClient
	log         *slog.Logger
	pollEvery   time.Duration
	resyncEvery time.Duration
	m           *registryMetrics

	syncMu sync.Mutex // one reload at a time

	mu      sync.Mutex // guards the fields below
	base    *config.Config
	baseGen uint64 // raised by SetBase
	records []Record
	print   string // fingerprint of base and records last merged
	// invalid is the fingerprint of the last merge that failed validation:
	// the same failing merge, read again by a poll or a late Pub/Sub
	// message, is counted and logged once.
	invalid string
	apply   func(*config.Config)
	failing bool // the last read failed (logs only transitions)

	current atomic.Pointer[config.Config]
	version atomic.Int64 // the global counter last read
}

// NewRegistry returns a Registry whose config is cfg.Base until Sync or
// Run reads the Store. A missing Redis or Base is an error naming it.
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	if cfg.Redis == nil || cfg.Base == nil {
		return nil, errors.New("tenants: new registry: Redis and Base are required")
	}
	store := cfg.Store
	if store == nil {
		store = &Store{rdb: cfg.Redis}
	}
	m, err := newRegistryMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	r := &Registry{
		store:       store,
		rdb:         cfg.Redis,
		log:         cfg.Logger,
		pollEvery:   cfg.PollEvery,
		resyncEvery: cfg.ResyncEvery,
		m:           m,
		base:        cfg.Base,
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.pollEvery <= 0 {
		r.pollEvery = DefaultPollEvery
	}
	if r.resyncEvery <= 0 {
		r.resyncEvery = DefaultResyncEvery
	}
	r.current.Store(cfg.Base)
	r.print = fingerprint(0, nil)
	return r, nil
}

// Config returns the current merged configuration. It is never modified;
// a change publishes a new one.
func (r *Registry) Config() *config.Config { return r.current.Load() }

// Base returns the configuration file's config the registry merges onto.
func (r *Registry) Base() *config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.base
}

// Store returns the registry's Store.
func (r *Registry) Store() *Store { return r.store }

// SetBase replaces the configuration file's config (a reload by
// config.Watcher) and re-merges the runtime records onto it, so a file
// reload keeps every admin change.
func (r *Registry) SetBase(cfg *config.Config) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.base = cfg
	r.baseGen++
	r.remerge(SourceFile)
}

// Sync reads every runtime record now and applies the result (source poll).
func (r *Registry) Sync(ctx context.Context) error { return r.reload(ctx, SourcePoll) }

// Refresh is Sync after this process's own admin write (source local), so
// the instance that served the write enforces it before it answers.
func (r *Registry) Refresh(ctx context.Context) error { return r.reload(ctx, SourceLocal) }

// Run keeps the registry current until ctx ends: it applies the current
// config with apply at once, then again after every change, from one
// goroutine at a time. It subscribes to keys.TenantsChannel (go-redis
// reconnects and resubscribes by itself; every (re)subscription triggers a
// full read, so messages missed while disconnected are caught up), polls
// keys.TenantsVersion every PollEvery and reads everything every
// ResyncEvery; at its start and daily it refreshes the runtime tenants'
// TTLs (Store.Keep). It returns nil when ctx ends. apply runs while the registry
// is locked: it must be quick and must not call Base or SetBase.
func (r *Registry) Run(ctx context.Context, apply func(*config.Config)) error {
	r.mu.Lock()
	r.apply = apply
	if apply != nil {
		apply(r.current.Load())
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.apply = nil
		r.mu.Unlock()
	}()

	ps := r.rdb.Subscribe(ctx, keys.TenantsChannel())
	defer ps.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.listen(ctx, ps)
	}()
	defer wg.Wait()

	poll := time.NewTicker(r.pollEvery)
	defer poll.Stop()
	resync := time.NewTicker(r.resyncEvery)
	defer resync.Stop()
	keep := time.NewTicker(keepEvery)
	defer keep.Stop()
	r.keep(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
			r.poll(ctx)
		case <-resync.C:
			_ = r.reload(ctx, SourcePoll)
		case <-keep.C:
			r.keep(ctx)
		}
	}
}

// listen reloads on every message and every (re)subscription until ctx ends.
func (r *Registry) listen(ctx context.Context, ps *redis.PubSub) {
	ch := ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(time.Second))
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			switch msg.(type) {
			case *redis.Subscription, *redis.Message:
				_ = r.reload(ctx, SourcePubSub)
			}
		}
	}
}

// poll reloads when the global version counter moved.
func (r *Registry) poll(ctx context.Context) {
	v, err := r.store.Version(ctx)
	if err != nil {
		r.readFailed(err)
		return
	}
	if v != r.version.Load() {
		_ = r.reload(ctx, SourcePoll)
	}
}

// reload reads the version counter and every record, then re-merges.
func (r *Registry) reload(ctx context.Context, source string) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	// The counter is read before the records: a write between the two is
	// in the records and moves the counter again, so it is read once more
	// at the next poll, never missed.
	v, err := r.store.Version(ctx)
	if err != nil {
		r.readFailed(err)
		return err
	}
	recs, err := r.store.List(ctx)
	if err != nil {
		r.readFailed(err)
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing {
		r.failing = false
		r.log.Info("tenants: runtime tenants readable again")
	}
	r.m.reads.WithLabelValues(source).Inc()
	r.version.Store(v)
	r.m.version.Set(float64(v))
	r.records = recs
	r.remerge(source)
	return nil
}

// readFailed counts a Redis error and logs when reads start failing.
func (r *Registry) readFailed(err error) {
	r.m.errors.WithLabelValues("read").Inc()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.failing {
		r.failing = true
		r.log.Warn("tenants: cannot read runtime tenants; keeping the running config", "err", err)
	}
}

// remerge merges base and records and applies the result when it changed
// and is valid. r.mu is held.
func (r *Registry) remerge(source string) {
	fp := fingerprint(r.baseGen, r.records)
	if fp == r.print || fp == r.invalid {
		return
	}
	merged := Merge(r.base, r.records)
	if err := merged.Validate(); err != nil {
		r.m.errors.WithLabelValues("invalid").Inc()
		valid, did, ok := quarantine(merged, r.current.Load(), err)
		if !ok {
			r.invalid = fp
			r.log.Error("tenants: merged tenants are invalid; keeping the running config", "source", source, "err", err)
			return
		}
		r.log.Error("tenants: merged tenants are invalid; applied with each API key held twice removed from the tenant that took it, and each tenant's own problems as stored",
			"source", source, "removed", did, "err", err)
		merged = valid
	}
	r.print = fp
	r.current.Store(merged)
	r.m.updates.WithLabelValues(source).Inc()
	runtime := 0
	for _, rec := range r.records {
		if rec.Spec != nil {
			runtime++
		}
	}
	r.log.Info("tenants: config applied", "source", source, "tenants", len(merged.Tenants), "runtime", runtime, "version", r.version.Load())
	if r.apply != nil {
		r.apply(merged)
	}
}

// fingerprint identifies a base (by its SetBase generation) and a set of
// records: equal fingerprints merge to equal configs.
func fingerprint(baseGen uint64, recs []Record) string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(baseGen, 10))
	for _, r := range recs {
		b.WriteString("\x00" + r.Tenant + "\x00" + strconv.FormatInt(r.Version, 10) + "\x00" + strconv.FormatBool(r.Deleted) + "\x00" + r.raw)
	}
	return b.String()
}
