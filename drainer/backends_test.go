package drainer_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/scheduler"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/backend"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// This file runs a drainer on either queue backend, built by the factories
// the services use (queue/backend), with the scheduler of due scheduled
// jobs (internal/scheduler) that every drainer runs: the harness of the
// scheduled and heartbeat tests, which run on both backends.

// backends are the queue backends every test of this harness runs on.
var backends = []string{backend.Redis, backend.Kafka}

// stack is one backend for one tenant: its producer, and the drainers
// started on it (each with a consumer of its own and a scheduler).
type stack struct {
	t       *testing.T
	rdb     redis.UniversalClient
	cfg     backend.Config
	tenant  string
	outflow config.Outflow
	prod    queue.Producer

	// hold, when set, runs first in the stack's handler; a non-nil error is
	// the delivery's.
	hold func(ctx context.Context, job queue.Envelope) error

	mu   sync.Mutex
	seen []delivered
}

// delivered is one job the stack's handler was given, when, and its
// Sluice-Attempt (the envelope's Attempt + 1, as HTTPSink sends it).
type delivered struct {
	id      string
	at      time.Time
	attempt int
}

// newStack builds a backend of name for tenant (Kafka: its own topic and
// group) with a producer; o is the tenant's outflow.
func newStack(t *testing.T, name, tenant string, o config.Outflow) *stack {
	t.Helper()
	rdb := testenv.Redis(t)
	cfg := backend.Config{Backend: name, Redis: rdb, Lease: 3 * time.Second, Tenants: []string{tenant},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if name == backend.Kafka {
		cfg.Kafka = kafkaq.Settings{Brokers: testenv.KafkaBrokers(t), Topic: testenv.Name(t, "jobs"), DLQTopic: testenv.Name(t, "dlq"),
			Partitions: 1, ReplicationFactor: 1, ConsumerGroup: testenv.Name(t, "group")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := backend.NewProducer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &stack{t: t, rdb: rdb, cfg: cfg, tenant: tenant, outflow: o, prod: p}
}

// enqueue makes jobs durable through the stack's producer.
func (s *stack) enqueue(jobs ...queue.Envelope) {
	s.t.Helper()
	if err := s.prod.Enqueue(context.Background(), jobs); err != nil {
		s.t.Fatal(err)
	}
}

// schedule stores one scheduled job of the tenant due at due.
func (s *stack) schedule(id string, due time.Time) {
	s.t.Helper()
	env := queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: s.tenant, Type: "mail", Cost: 1,
		Payload: []byte(`{}`), EnqueuedAt: time.Now(), NotBefore: &due}
	if err := scheduler.Add(context.Background(), s.rdb, s.tenant, []scheduler.Job{{Envelope: env, Due: due}}, 100); err != nil {
		s.t.Fatal(err)
	}
}

// start runs a drainer (consumer, scheduler, drainer) until the returned
// stop is called (also at the test's end); reg gets its metrics.
func (s *stack) start(reg *prometheus.Registry) (stop func()) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, runConsumer, err := backend.NewConsumer(ctx, s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scheduler.New(scheduler.Config{Redis: s.rdb, Producer: s.prod, Lease: 3 * time.Second, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	h := drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		s.mu.Lock()
		s.seen = append(s.seen, delivered{id: job.ID, at: time.Now(), attempt: job.Attempt + 1})
		hold := s.hold
		s.mu.Unlock()
		if hold != nil {
			return hold(ctx, job)
		}
		return nil
	})
	d, err := drainer.New(drainer.Config{Consumer: c, Redis: s.rdb, Settings: settings(), Handler: h, Scheduler: sc,
		Registerer: reg, Tenants: map[string]config.Tenant{s.tenant: {Outflow: s.outflow}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stopConsumer := context.WithCancel(context.Background())
	dctx, stopDrainer := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = runConsumer(cctx) }()
	go func() { defer wg.Done(); _ = d.Run(dctx); stopConsumer() }()
	var once sync.Once
	stop = func() { once.Do(func() { stopDrainer(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// deliveredAt returns when job id was delivered (zero: not yet).
func (s *stack) deliveredAt(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.seen {
		if d.id == id {
			return d.at
		}
	}
	return time.Time{}
}

// water returns the tenant's bucket water level in whole units (rounded),
// as the bucket script stored it at its last take.
func (s *stack) water() int64 {
	s.t.Helper()
	v, err := s.rdb.HGet(context.Background(), keys.Water(s.tenant), "water").Result()
	if err == redis.Nil {
		return 0
	}
	if err != nil {
		s.t.Fatal(err)
	}
	f, _ := strconv.ParseFloat(v, 64)
	return int64(f/1e6 + 0.5)
}

// slowOutflow is a shaped outflow whose bucket barely drains during a test
// (0.05 units/s, capacity 10): its water level counts the turns taken.
var slowOutflow = config.Outflow{Rate: 0.05, Capacity: 10}
