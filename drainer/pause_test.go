package drainer_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
	"github.com/sluicehq/sluice/queue/redisq"
)

// timedSink is a real downstream that holds each delivery for hold and
// records when each arrived and when it was answered.
type timedSink struct {
	srv  *httptest.Server
	hold time.Duration
	mu   sync.Mutex
	arr  map[string][]time.Time // tenant → arrival times
	done map[string]int         // tenant → deliveries answered
}

func newTimedSink(t testing.TB, hold time.Duration) *timedSink {
	s := &timedSink{hold: hold, arr: map[string][]time.Time{}, done: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tn := r.Header.Get("Sluice-Tenant")
		s.mu.Lock()
		s.arr[tn] = append(s.arr[tn], time.Now())
		s.mu.Unlock()
		time.Sleep(s.hold)
		s.mu.Lock()
		s.done[tn]++
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// arrivals returns tenant's arrival times.
func (s *timedSink) arrivals(tenant string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.arr[tenant]...)
}

// answered returns how many of tenant's deliveries were answered.
func (s *timedSink) answered(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[tenant]
}

// between counts the times in [from, to).
func between(ts []time.Time, from, to time.Time) int {
	n := 0
	for _, at := range ts {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// pauseBackend builds a consumer of one queue backend and a way to queue
// jobs on it.
type pauseBackend struct {
	name  string
	build func(t *testing.T, rdb redis.UniversalClient) (queue.Consumer, func(...queue.Envelope))
}

var pauseBackends = []pauseBackend{
	{"redis", func(t *testing.T, rdb redis.UniversalClient) (queue.Consumer, func(...queue.Envelope)) {
		c := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: 3 * time.Second, Poll: 10 * time.Millisecond}))
		return c, func(jobs ...queue.Envelope) { push(t, rdb, jobs...) }
	}},
	{"kafka", kafkaBackend},
}

// kafkaBackend is a Kafka consumer of a fresh one-partition topic (deleted
// at the end), run until the test ends, with a small MaxTenantJobs so a
// paused tenant's FIFO overflows; its jobs are produced by a kafkaq
// Producer.
func kafkaBackend(t *testing.T, rdb redis.UniversalClient) (queue.Consumer, func(...queue.Envelope)) {
	brokers := testenv.KafkaBrokers(t)
	ks := kafkaq.Settings{Brokers: brokers, Topic: testenv.Name(t, "jobs"), DLQTopic: testenv.Name(t, "dlq"),
		Partitions: 1, ReplicationFactor: 1, ConsumerGroup: testenv.Name(t, "group")}
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{ks.Topic, ks.DLQTopic}})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := kafkaq.NewProducer(ctx, kafkaq.ProducerConfig{Kafka: ks, Redis: rdb, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := kafkaq.NewConsumer(ctx, kafkaq.ConsumerConfig{
		Kafka: ks, Redis: rdb, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxTenantJobs: 20,
		CommitInterval: 100 * time.Millisecond, FetchMaxWait: 100 * time.Millisecond,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: 300 * time.Millisecond, RebalanceTimeout: 10 * time.Second, RevokeTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("consumer Run: %v", err)
		}
	})
	return c, func(jobs ...queue.Envelope) {
		for i := range jobs {
			jobs[i].Cost = max(jobs[i].Cost, 1)
		}
		if err := p.Enqueue(context.Background(), jobs); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
}

// TestDrainerPauseAndResume, on both backends: a tenant shaped at 10/s
// (capacity 5) whose deliveries take 300 ms is paused mid-drain. No
// delivery arrives at the sink after the pause (the bound is 1 s; the
// drainer is told directly here, the admin API's path through the registry
// is ingest's test), the deliveries in flight finish, and
// sluice_outflow_paused is 1. Another tenant, on the same Kafka partition,
// is delivered meanwhile although the paused tenant's jobs fill its FIFO
// (MaxTenantJobs 20) and hold the commit watermark. On resume deliveries
// start again at once (well within 1 s) and the first second brings at
// most rate + capacity = 15.
func TestDrainerPauseAndResume(t *testing.T) {
	for _, b := range pauseBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testPauseAndResume(t, b)
		})
	}
}

func testPauseAndResume(t *testing.T, b pauseBackend) {
	rdb := testenv.Redis(t)
	tenant, other := testenv.Name(t, "paused"), testenv.Name(t, "other")
	s := newTimedSink(t, 300*time.Millisecond)
	cons, enqueue := b.build(t, rdb)
	shaped := tenantCfg(s.srv.URL, config.Outflow{Rate: 10, Capacity: 5})
	tenants := func(paused bool) map[string]config.Tenant {
		p := shaped
		p.Outflow.Paused = paused
		return map[string]config.Tenant{tenant: p, other: tenantCfg(s.srv.URL, config.Outflow{})}
	}
	reg := prometheus.NewRegistry()
	d := start(t, drainer.Config{Consumer: cons, Redis: rdb, Tenants: tenants(false), Settings: settings(), Registerer: reg})
	enqueue(jobs(tenant, 100)...)
	testenv.WaitFor(t, 15*time.Second, "the first deliveries", func() bool { return len(s.arrivals(tenant)) >= 8 })

	paused := time.Now()
	d.SetTenants(tenants(true))
	if v := testenv.MetricValue(t, reg, "sluice_outflow_paused", map[string]string{"tenant": tenant}); v != 1 {
		t.Errorf("sluice_outflow_paused while paused = %v, want 1", v)
	}
	enqueue(jobs(other, 5)...)
	testenv.WaitFor(t, 15*time.Second, "the other tenant's jobs while one is paused", func() bool { return len(s.arrivals(other)) == 5 })
	time.Sleep(time.Until(paused.Add(1500 * time.Millisecond)))
	arr := s.arrivals(tenant)
	if late := between(arr, paused.Add(200*time.Millisecond), time.Now()); late > 0 {
		t.Errorf("%d deliveries arrived from 200 ms after the pause on; want none (the bound is 1 s)", late)
	}
	if got := s.answered(tenant); got != len(arr) {
		t.Errorf("%d deliveries answered of %d arrived: the ones in flight at the pause must finish", got, len(arr))
	}
	before := len(arr)
	t.Logf("%s: %d delivered before the pause, none after", b.name, before)

	resumed := time.Now()
	d.SetTenants(tenants(false))
	if v := testenv.MetricValue(t, reg, "sluice_outflow_paused", map[string]string{"tenant": tenant}); v != 0 {
		t.Errorf("sluice_outflow_paused after resume = %v, want 0", v)
	}
	testenv.WaitFor(t, time.Second, "a delivery within 1 s of the resume", func() bool { return len(s.arrivals(tenant)) > before })
	first := s.arrivals(tenant)[before].Sub(resumed)
	time.Sleep(time.Until(resumed.Add(1100 * time.Millisecond)))
	n := between(s.arrivals(tenant), resumed, resumed.Add(time.Second))
	t.Logf("%s: first delivery %v after the resume, %d in its first second", b.name, first, n)
	if n > 15 {
		t.Errorf("%d deliveries in the first second after the resume, want at most rate + capacity = 15 (no burst)", n)
	}
}

// TestDrainerPausedLaneClaimsNothing (Redis backend): a tenant paused from
// the start has its jobs left on its list, unclaimed, and its lane makes no
// script call while it waits (only the reaper's run); the resume delivers
// them within 1 s.
func TestDrainerPausedLaneClaimsNothing(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "held")
	s := newTimedSink(t, 0)
	cfg := tenantCfg(s.srv.URL, config.Outflow{Paused: true})
	push(t, rdb, jobs(tenant, 3)...)
	d := start(t, drainer.Config{Consumer: mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: 3 * time.Second, Poll: 10 * time.Millisecond})),
		Redis: rdb, Tenants: map[string]config.Tenant{tenant: cfg}, Settings: settings()})
	time.Sleep(500 * time.Millisecond) // a negative result needs a window: 50 claim polls
	calls := scriptCalls(t, rdb)
	time.Sleep(2 * time.Second)
	// The reaper runs every 750 ms (3 calls in 2 s) and the lease keeper
	// may tick; a lane that claimed would add one a poll, 10 ms here
	// (about 200, or 20 once idle backs off).
	if n := scriptCalls(t, rdb) - calls; n > 5 {
		t.Errorf("a paused drainer made %d script calls in 2 s, want at most 5, the reaper's (the lane waits for a change)", n)
	}
	if n := len(s.arrivals(tenant)); n != 0 {
		t.Errorf("%d deliveries of a paused tenant, want 0", n)
	}
	if n := rdb.LLen(ctx, keys.Queue(tenant)).Val(); n != 3 {
		t.Errorf("paused tenant's queue holds %d jobs, want its 3, unclaimed", n)
	}
	cfg.Outflow.Paused = false
	d.SetTenants(map[string]config.Tenant{tenant: cfg})
	testenv.WaitFor(t, time.Second, "the 3 jobs within 1 s of the resume", func() bool { return len(s.arrivals(tenant)) == 3 })
}

// TestRemovedTenantGaugesGone: a tenant removed from the configuration (a
// DELETE through the admin API) loses its gauges (water level and outflow
// rates) at once. Before, they kept its last values for good, read as a
// live tenant, while its later samples went to the _other label.
func TestRemovedTenantGaugesGone(t *testing.T) {
	t.Parallel()
	tenant := testenv.Name(t, "gone")
	one := startOne(t, tenant, func(url string) config.Tenant { return tenantCfg(url, config.Outflow{Rate: 100, Capacity: 5}) })
	s, reg, d := one.sink, one.reg, one.d
	testenv.WaitFor(t, 15*time.Second, "the deliveries", func() bool { return len(s.arrivals(tenant)) == 5 })
	gauges := []string{"sluice_water_level", "sluice_outflow_configured_rate", "sluice_outflow_effective_rate"}
	for _, g := range gauges {
		if _, ok := testenv.Metric(t, reg, g, map[string]string{"tenant": tenant}); !ok {
			t.Fatalf("%s{tenant=%s} absent while the tenant is configured", g, tenant)
		}
	}
	d.SetTenants(map[string]config.Tenant{})
	for _, g := range append(gauges, "sluice_outflow_measured_rate") {
		if v, ok := testenv.Metric(t, reg, g, map[string]string{"tenant": tenant}); ok {
			t.Errorf("%s{tenant=%s} = %v after the tenant was removed, want no series", g, tenant, v)
		}
	}
}

// TestTenantWithoutTargetWaits: over HTTP, a tenant with no target URL
// (PATCH {"target":null}) is held as a paused one: its jobs stay queued,
// none dead-lettered, and are all delivered once a target is set. Before,
// each was claimed and dead-lettered at once ("no target url").
func TestTenantWithoutTargetWaits(t *testing.T) {
	t.Parallel()
	tenant := testenv.Name(t, "notarget")
	one := startOne(t, tenant, func(string) config.Tenant { return tenantCfg("", config.Outflow{}) })
	s, reg, d, rdb := one.sink, one.reg, one.d, one.rdb
	time.Sleep(1500 * time.Millisecond)
	if n := testenv.MetricValue(t, reg, "sluice_dlq_total", map[string]string{"tenant": tenant, "reason": "rejected"}); n != 0 {
		t.Errorf("%v jobs dead-lettered while the tenant had no target, want none", n)
	}
	if n := rdb.LLen(context.Background(), keys.Queue(tenant)).Val(); n != 5 {
		t.Errorf("%d jobs queued while the tenant had no target, want all 5", n)
	}
	d.SetTenants(map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{})})
	testenv.WaitFor(t, 10*time.Second, "every job delivered once a target is set", func() bool { return len(s.arrivals(tenant)) == 5 })
}

// oneTenant is a drainer of one tenant on the Redis backend, with a timed
// sink and its own metrics registry, 5 of the tenant's jobs queued.
type oneTenant struct {
	rdb  redis.UniversalClient
	sink *timedSink
	reg  *prometheus.Registry
	d    *drainer.Drainer
}

// startOne starts oneTenant for tenant, configured by cfg from the sink's
// URL.
func startOne(t *testing.T, tenant string, cfg func(url string) config.Tenant) oneTenant {
	t.Helper()
	o := oneTenant{rdb: testenv.Redis(t), sink: newTimedSink(t, 0), reg: prometheus.NewRegistry()}
	cons, enqueue := pauseBackends[0].build(t, o.rdb)
	o.d = start(t, drainer.Config{Consumer: cons, Redis: o.rdb, Settings: settings(), Registerer: o.reg,
		Tenants: map[string]config.Tenant{tenant: cfg(o.sink.srv.URL)}})
	enqueue(jobs(tenant, 5)...)
	return o
}
