// Package scheduler holds scheduled jobs (submitted with "not_before" or
// "delay") outside the queue until they are due, and moves them onto it.
//
// Ingest stores a scheduled job with Add: its envelope in keys.ScheduledJobs,
// its id in keys.JobIndex(t, "scheduled") scored by its due time, its state
// "scheduled" with due_at, and a hint in the global keys.ScheduledTenants
// (tenant → earliest due). It is not on the queue backend, so it holds up no
// other job and spends no outflow slot or turn while it waits, and it is not
// in the backlog counter (keys.Backlog) until due.
//
// A Scheduler runs in every drainer. Every Interval it reads the hint for
// tenants with something due (by Redis TIME) and, for each, leases up to
// Batch due jobs (lua/schedule_take.lua: into keys.ScheduledMoving, scored by
// the lease deadline, so two drainers never move the same job and a dead
// mover's jobs are taken again after Lease), enqueues them through the
// configured backend's queue.Producer, where they get state queued, a seq
// and the backlog like any new job, at the tail of their tenant's queue, and
// then ends the moves (lua/schedule_done.lua). Every Sweep it also reads each
// configured tenant's next due time, repairing a lost hint. All state is in
// Redis, so scheduled jobs survive drainer restarts. A job whose Enqueue
// succeeded but whose move was not ended (the drainer died between the two)
// is enqueued again after its lease: at least once, with the same job id.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/quietlog"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// Defaults of Config's zero fields.
const (
	DefaultInterval = 200 * time.Millisecond
	DefaultSweep    = 10 * time.Second
	DefaultBatch    = 100
	DefaultLease    = 30 * time.Second
)

// enqueueTimeout bounds one move's Enqueue.
const enqueueTimeout = 10 * time.Second

// maxDueTenants bounds the tenants one page of a tick reads from the hint,
// and maxDuePages the pages of one tick.
const (
	maxDueTenants = 1000
	maxDuePages   = 100
)

// Config wires a Scheduler. Redis and Producer are required; every other
// field documents its default.
type Config struct {
	// Redis holds the scheduled jobs and the hint (required).
	Redis redis.UniversalClient
	// Producer enqueues due jobs on the configured queue backend
	// (required).
	Producer queue.Producer
	// Interval is how often the hint is read (default DefaultInterval,
	// 200ms): a due job of a tenant with no backlog is delivered within
	// about Interval plus one claim of its lane.
	Interval time.Duration
	// Sweep is how often every configured tenant's next due time is read,
	// to repair a hint lost to a failed write (default DefaultSweep, 10s).
	Sweep time.Duration
	// Batch is the most jobs one move takes (default DefaultBatch, 100).
	Batch int
	// Lease is how long a move may take before another scheduler takes its
	// jobs again (default DefaultLease, 30s; cmd/drainer never passes less,
	// since a move's enqueue and its end may take 10 s each).
	Lease time.Duration
	// Logger receives the scheduler's logs (nil: slog.Default()).
	Logger *slog.Logger
	// Registerer receives its metrics (nil: not registered; they still
	// count).
	Registerer prometheus.Registerer
	// Clock times the sweeps (nil: clock.Real); due times are Redis TIME.
	Clock clock.Clock
}

// Scheduler moves due scheduled jobs onto the queue. Build it with New,
// run it with Run.
type Scheduler struct {
	cfg   Config
	warn  *quietlog.Log // failed steps: one line per step and tenant per failLogEvery
	clock clock.Clock
	m     *metrics
}

// failLogEvery is how often one step's failures of one tenant are logged at
// most (package quietlog): Redis down fails the due check every Interval
// (200 ms) in every drainer.
const failLogEvery = 10 * time.Second

// New checks cfg and fills its defaults. A missing Redis or Producer is an
// error naming the field.
func New(cfg Config) (*Scheduler, error) {
	switch {
	case cfg.Redis == nil:
		return nil, errors.New("scheduler: new: Redis is required")
	case cfg.Producer == nil:
		return nil, errors.New("scheduler: new: Producer is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Sweep <= 0 {
		cfg.Sweep = DefaultSweep
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Scheduler{cfg: cfg, warn: quietlog.New(cfg.Logger, cfg.Clock, failLogEvery),
		clock: clock.Or(cfg.Clock), m: m}, nil
}

// Run moves due jobs until ctx is done, then returns nil. tenants returns
// the configured tenants, the only ones whose jobs it moves and sweeps;
// moved (nil: none) is called with a tenant after jobs of it were put on
// its queue. It starts with a sweep, so jobs that fell due while no drainer
// ran move at once.
func (s *Scheduler) Run(ctx context.Context, tenants func() []string, moved func(tenant string)) error {
	if moved == nil {
		moved = func(string) {}
	}
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	var swept time.Time
	for ctx.Err() == nil {
		// tenants() is read only when needed (a sweep, or jobs due): at
		// 10,000 tenants a set built every Interval was most of an idle
		// drainer's CPU.
		if now := s.clock.Now(); now.Sub(swept) >= s.cfg.Sweep || now.Before(swept) {
			swept = now
			s.sweep(ctx, tenants())
		}
		s.tick(ctx, tenants, moved)
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	return nil
}

// tick moves the jobs of every configured tenant whose hint is due. A
// tenant that is not configured keeps its scheduled jobs, as a removed
// tenant's lane leaves its queued jobs, until it is configured again; its
// hint entry stays (another drainer of the same Redis may have it), and
// the hint is read in pages of maxDueTenants past such entries (at most
// maxDuePages), so they never hide a configured tenant's due jobs.
func (s *Scheduler) tick(ctx context.Context, tenants func() []string, moved func(string)) {
	if !s.mayBeDue(ctx) {
		return
	}
	var list []string // the configured tenants, read once a tick when one is due
	for skip, page := 0, 0; page < maxDuePages; page++ {
		v, err := dueCall(maxDueTenants, skip).Run(ctx, s.cfg.Redis).Result()
		var due []string
		if err == nil {
			due, err = parseDue(v)
		}
		if err != nil {
			s.fail(ctx, "due", "", err)
			return
		}
		if len(due) == 0 {
			return
		}
		if list == nil {
			list = tenants()
		}
		known := make(map[string]bool, len(due)) // the due tenants configured here
		for _, t := range due {
			known[t] = false
		}
		for _, t := range list {
			if _, isDue := known[t]; isDue {
				known[t] = true
			}
		}
		for _, t := range due {
			if ctx.Err() != nil {
				return
			}
			if !known[t] {
				skip++ // its jobs wait, as its queued jobs do; its entry stays
				continue
			}
			if s.move(ctx, t) > 0 {
				moved(t)
			}
		}
		if len(due) < maxDueTenants {
			return
		}
	}
}

// dueSlack is how far ahead of this process's clock the hint's earliest
// entry may lie and still be asked about with schedule_due.lua, which
// decides at Redis TIME: a clock behind Redis's by less than this moves
// nothing late.
const dueSlack = time.Second

// mayBeDue reads the hint's earliest entry with one plain ZRANGE (no
// script call: lever L13) and reports whether it may be due: at most
// dueSlack past this process's clock, or unreadable (then the script is
// asked, as before). An empty hint is not due.
func (s *Scheduler) mayBeDue(ctx context.Context) bool {
	first, err := s.cfg.Redis.ZRangeWithScores(ctx, keys.ScheduledTenants(), 0, 0).Result()
	if err != nil {
		return true
	}
	if len(first) == 0 {
		return false
	}
	return time.UnixMilli(int64(first[0].Score)).Before(s.clock.Now().Add(dueSlack))
}

// sweepBatch bounds the tenants of one sweep pipeline.
const sweepBatch = 1000

// sweep reads each configured tenant's next due time and count (read-only
// schedule_take.lua calls, sweepBatch per pipeline, so 10,000 tenants cost
// 10 round trips): the count sets sluice_jobs_scheduled, and a next due
// time lowers the hint (ZADD LT), so a tenant whose hint was lost is found
// again. A first pipeline asks each tenant with one EXISTS whether it holds
// a scheduled index or moving set at all; only those that do (or whose
// EXISTS failed) get the script, and the others read as 0 scheduled, so an
// idle tenant costs one EXISTS per sweep instead of a script call.
func (s *Scheduler) sweep(ctx context.Context, tenants []string) {
	for from := 0; from < len(tenants) && ctx.Err() == nil; from += sweepBatch {
		part := s.withSchedule(ctx, tenants[from:min(from+sweepBatch, len(tenants))])
		calls := make([]lua.Call, len(part))
		for i, t := range part {
			calls[i] = takeCall(t, 0, s.cfg.Lease)
		}
		for i, cmd := range lua.Exec(ctx, s.cfg.Redis, calls, nil) {
			s.swept(ctx, part[i], cmd)
		}
	}
}

// withSchedule returns those of tenants holding a scheduled index or a
// moving set, or whose EXISTS failed; the rest get 0 scheduled.
func (s *Scheduler) withSchedule(ctx context.Context, tenants []string) []string {
	exists := make([]*redis.IntCmd, len(tenants))
	_, _ = s.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range tenants {
			exists[i] = p.Exists(ctx, keys.JobIndex(t, "scheduled"), keys.ScheduledMoving(t))
		}
		return nil
	})
	var out []string
	for i, t := range tenants {
		if n, err := exists[i].Result(); err != nil || n > 0 {
			out = append(out, t)
		} else {
			s.m.setScheduled(t, 0, false)
		}
	}
	return out
}

// swept handles one tenant's sweep reply.
func (s *Scheduler) swept(ctx context.Context, t string, cmd *redis.Cmd) {
	v, err := cmd.Result()
	var r takeReply
	if err == nil {
		r, err = parseTake(v)
	}
	if err != nil {
		s.fail(ctx, "sweep", t, fmt.Errorf("scheduler: sweep %s: %w", t, err))
		return
	}
	s.m.setScheduled(t, r.Count, false)
	if r.NextMS >= 0 {
		if err := lowerHint(ctx, s.cfg.Redis, t, r.NextMS); err != nil {
			s.fail(ctx, "hint", t, err)
		}
	}
}

// fail counts a failed step and logs it, at most once per failLogEvery
// per step and tenant, and per step alone for a sweep (with Redis down a
// sweep fails for every configured tenant at once) (not when ctx ended).
func (s *Scheduler) fail(ctx context.Context, op, tenant string, err error) {
	if ctx.Err() != nil {
		return
	}
	s.m.errors.WithLabelValues(op).Inc()
	key := op + "\x00" + tenant
	if op == "sweep" {
		key = op
	}
	s.warn.Warn(key, "scheduler: "+op, "tenant", tenant, "err", err)
}
