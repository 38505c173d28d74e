package ingest_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
	"github.com/sluicehq/sluice/queue/redisq"
)

// arrivalSink is a real downstream that holds each delivery for hold and
// records when each arrived and how many were answered.
type arrivalSink struct {
	srv      *httptest.Server
	mu       sync.Mutex
	arrived  []time.Time
	answered int
}

func newArrivalSink(t testing.TB, hold time.Duration) *arrivalSink {
	s := &arrivalSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.arrived = append(s.arrived, time.Now())
		s.mu.Unlock()
		time.Sleep(hold)
		s.mu.Lock()
		s.answered++
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// counts returns the arrival times and how many deliveries were answered.
func (s *arrivalSink) counts() ([]time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.arrived...), s.answered
}

// since counts the times at or after from and before to.
func since(ts []time.Time, from, to time.Time) int {
	n := 0
	for _, at := range ts {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// pauseStack is the whole of sluice on one private Redis, wired as
// cmd/ingest and cmd/drainer wire it: an ingest Server (served, so it
// flushes its admission counts) and a drainer, each applying its own
// tenants.Registry, on the Redis or the Kafka queue backend.
type pauseStack struct {
	*adminIngest
	drainerReg *prometheus.Registry
}

func startPauseStack(t *testing.T, backend string, base *config.Config) *pauseStack {
	t.Helper()
	rdb := privateRedis(t)
	producer, consumer := pauseQueue(t, backend, rdb, base)
	var mu sync.Mutex
	var srv *ingest.Server
	ingestSide, ingestSeen := runRegistry(t, rdb, base, nil, func(c *config.Config) {
		mu.Lock()
		defer mu.Unlock()
		if srv != nil {
			srv.SetConfig(c)
		}
	})
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	promReg := prometheus.NewRegistry()
	s, err := ingest.New(ingest.Config{Settings: ingestSide.Config(), Redis: rdb, Producer: producer, Admitter: adm,
		Registerer: promReg, Gatherer: promReg, Tenants: ingestSide})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	srv = s
	mu.Unlock()
	url := "http://" + serve(t, srv, nil)

	dreg := prometheus.NewRegistry()
	d, err := drainer.New(drainer.Config{Consumer: consumer, Redis: rdb, Tenants: base.Tenants, Registerer: dreg,
		Settings: config.Drainer{Lease: 3 * time.Second, MaxAttempts: 3, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, ShutdownTimeout: 2 * time.Second},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runRegistry(t, rdb, base, nil, func(c *config.Config) { d.SetTenants(c.Tenants) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &pauseStack{adminIngest: &adminIngest{harness: &harness{srv: srv, url: url, reg: promReg}, reg: ingestSide, seen: ingestSeen}, drainerReg: dreg}
}

// pauseQueue is the producer and the consumer of backend on rdb: Redis
// lists, or a fresh one-partition Kafka topic with a fresh group (base's
// queue section is set to match).
func pauseQueue(t *testing.T, backend string, rdb *redis.Client, base *config.Config) (queue.Producer, queue.Consumer) {
	t.Helper()
	if backend == "redis" {
		p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
		if err != nil {
			t.Fatal(err)
		}
		return p, mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: 3 * time.Second, Poll: 10 * time.Millisecond}))
	}
	brokers := testenv.KafkaBrokers(t)
	ks := kafkaq.Settings{Brokers: brokers, Topic: testenv.CreateTopic(t, brokers, 1), Partitions: 1, ReplicationFactor: 1,
		DLQTopic: testenv.Name(t, "dlq"), ConsumerGroup: testenv.Name(t, "group"), BatchTimeout: 2 * time.Millisecond, ProduceTimeout: 2 * time.Second}
	base.Queue.Backend, base.Kafka.Brokers, base.Kafka.Topic = "kafka", brokers, ks.Topic
	p, err := kafkaq.NewProducer(t.Context(), kafkaq.ProducerConfig{Kafka: ks, Redis: rdb})
	if err != nil {
		t.Fatalf("kafka producer: %v", err)
	}
	c, err := kafkaq.NewConsumer(t.Context(), kafkaq.ConsumerConfig{Kafka: ks, Redis: rdb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CommitInterval: 100 * time.Millisecond, FetchMaxWait: 100 * time.Millisecond, SessionTimeout: 6 * time.Second,
		HeartbeatInterval: 300 * time.Millisecond, RebalanceTimeout: 10 * time.Second, RevokeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	// Cleanups run last-in first-out: the drainer (registered later) stops
	// before the consumer, the producer closes after both.
	t.Cleanup(func() { _ = p.Close() })
	t.Cleanup(func() { cancel(); <-done })
	return p, c
}

// TestPauseAndResumeThroughTheAdminAPI, on both backends, runs ingest and a
// drainer, each with its registry, and a downstream holding each delivery
// 300 ms; the tenant is shaped at 10/s with a bucket of 5.
//
//   - PATCH {"outflow":{"paused":true}}: no delivery arrives at the sink
//     from 1 s after the PATCH answered (the registry's propagation
//     included), and the deliveries in flight finish;
//   - meanwhile ingest still answers 202 and the backlog grows; stats say
//     "paused": true, sluice_outflow_paused is 1 on ingest and on the
//     drainer, and the audit entry shows outflow.paused false → true;
//   - PATCH {"outflow":{"paused":false}}: deliveries start again within 1 s,
//     at most rate + capacity = 15 in the first second (no burst).
func TestPauseAndResumeThroughTheAdminAPI(t *testing.T) {
	for _, backend := range []string{"redis", "kafka"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			sink := newArrivalSink(t, 300*time.Millisecond)
			base := adminConfig(t, tenantYAML("acme", "    outflow: {rate: 10, capacity: 5, max_backlog: 1000}\n    target: {url: \""+sink.srv.URL+"\"}\n"))
			st := startPauseStack(t, backend, base)
			for i := range 40 {
				if r := st.post(t, "acme", "/v1/jobs", `{"type":"email"}`); r.status != http.StatusAccepted {
					t.Fatalf("job %d: %d %s", i, r.status, r.body)
				}
			}
			testenv.WaitFor(t, 15*time.Second, "the first deliveries", func() bool { a, _ := sink.counts(); return len(a) >= 6 })

			r := st.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, `{"outflow":{"paused":true}}`)
			paused := time.Now()
			if o, _ := decodeTenant(t, r).Spec["outflow"].(map[string]any); r.status != http.StatusOK || o["paused"] != true || o["rate"] != 10.0 {
				t.Fatalf("pause: %d %s; want 200 with paused true and the rate kept", r.status, r.body)
			}
			for i := range 10 {
				if r := st.post(t, "acme", "/v1/jobs", `{"type":"email"}`); r.status != http.StatusAccepted {
					t.Fatalf("job %d while paused: %d %s, want 202", i, r.status, r.body)
				}
			}
			time.Sleep(time.Until(paused.Add(1500 * time.Millisecond)))
			arr, answered := sink.counts()
			if late := since(arr, paused.Add(time.Second), time.Now()); late > 0 {
				t.Errorf("%d deliveries arrived more than 1 s after the pause, want none", late)
			}
			if answered != len(arr) {
				t.Errorf("%d of %d deliveries answered: those in flight at the pause must finish", answered, len(arr))
			}
			// The backlog falls in each delivery's finish call, which runs
			// after the sink answered: wait for the last of them.
			testenv.WaitFor(t, 3*time.Second, "the answered deliveries finished", func() bool {
				return readPauseStats(t, st).Backlog == int64(50-len(arr))
			})
			checkPausedViews(t, st, true, 50-len(arr))
			before := len(arr)
			t.Logf("%s: %d delivered before the pause, %d within 1 s after it", backend, before, since(arr, paused, paused.Add(time.Second)))

			resumed := time.Now() // before the PATCH: a delivery may arrive before its answer
			if r := st.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, `{"outflow":{"paused":false}}`); r.status != http.StatusOK {
				t.Fatalf("resume: %d %s", r.status, r.body)
			}
			testenv.WaitFor(t, time.Second, "a delivery within 1 s of the resume", func() bool { a, _ := sink.counts(); return len(a) > before })
			time.Sleep(time.Until(resumed.Add(1100 * time.Millisecond)))
			arr, _ = sink.counts()
			n := since(arr, resumed, resumed.Add(time.Second))
			t.Logf("%s: first delivery %v after the resume, %d in its first second", backend, arr[before].Sub(resumed), n)
			if n > 15 {
				t.Errorf("%d deliveries in the first second after the resume, want at most rate + capacity = 15 (no burst)", n)
			}
			checkPausedViews(t, st, false, -1)
		})
	}
}

// pauseStats is acme's stats: paused, the backlog, and the body read.
type pauseStats struct {
	Paused  bool  `json:"paused"`
	Backlog int64 `json:"backlog"`
	body    []byte
}

func readPauseStats(t *testing.T, st *pauseStack) pauseStats {
	t.Helper()
	var stats pauseStats
	r := st.admin(t, http.MethodGet, "/v1/tenants/acme/stats", aliceToken, "")
	if err := json.Unmarshal(r.body, &stats); err != nil || r.status != http.StatusOK {
		t.Fatalf("stats: %d %s", r.status, r.body)
	}
	stats.body = r.body
	return stats
}

// checkPausedViews checks what shows a pause: the stats' paused and a
// backlog of backlog units (-1: any), sluice_outflow_paused on ingest and
// on the drainer, and the newest audit entry.
func checkPausedViews(t *testing.T, st *pauseStack, paused bool, backlog int) {
	t.Helper()
	stats := readPauseStats(t, st)
	if stats.Paused != paused || (backlog >= 0 && stats.Backlog != int64(backlog)) {
		t.Errorf("stats %s; want paused %v, backlog %d", stats.body, paused, backlog)
	}
	want := 0.0
	if paused {
		want = 1
	}
	labels := map[string]string{"tenant": "acme"}
	if g, d := testenv.MetricValue(t, st.harness.reg, "sluice_outflow_paused", labels), testenv.MetricValue(t, st.drainerReg, "sluice_outflow_paused", labels); g != want || d != want {
		t.Errorf("sluice_outflow_paused: ingest %v, drainer %v; want %v", g, d, want)
	}
	a := st.admin(t, http.MethodGet, "/admin/v1/tenants/acme/audit?limit=1", aliceToken, "")
	change := `{"path":"outflow.paused","old":"false","new":"true","truncated":false}`
	if !paused {
		change = `{"path":"outflow.paused","old":"true","new":"false","truncated":false}`
	}
	if !strings.Contains(string(a.body), `"who":"alice"`) || !strings.Contains(string(a.body), change) {
		t.Errorf("newest audit entry %s, want alice's change %s", a.body, change)
	}
}

// TestAdmissionRatesAcrossIngests runs two served ingest Servers on one
// Redis: a tenant of 7 jobs a minute sends 7 jobs to A (admitted, one
// request a batch of 3) and 4 to B (refused with 429, one a batch of 2).
// Within a few seconds (each server adds its counts once a second) the
// stats of either server show admitted_rate 0.7 and refused_rate 0.4: the
// jobs of the last 10 complete seconds, across both.
func TestAdmissionRatesAcrossIngests(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	base := adminConfig(t, tenantYAML("acme", "    admission: {algorithm: fixed_window, limit: 7, period: 1m}\n    outflow: {rate: 1}\n"))
	var hs [2]*harness
	for i := range hs {
		srv, reg := newServer(t, base, deps{rdb: rdb})
		hs[i] = &harness{srv: srv, url: "http://" + serve(t, srv, nil), reg: reg}
	}
	for i, c := range []struct {
		h      *harness
		path   string
		body   string
		status int
	}{
		{hs[0], "/v1/jobs", `{"type":"a"}`, 202}, {hs[0], "/v1/jobs", `{"type":"a"}`, 202},
		{hs[0], "/v1/jobs:batch", `{"jobs":[{"type":"a"},{"type":"a"},{"type":"a"}]}`, 202},
		{hs[0], "/v1/jobs", `{"type":"a"}`, 202}, {hs[0], "/v1/jobs", `{"type":"a"}`, 202},
		{hs[1], "/v1/jobs", `{"type":"a"}`, 429}, {hs[1], "/v1/jobs", `{"type":"a"}`, 429},
		{hs[1], "/v1/jobs:batch", `{"jobs":[{"type":"a"},{"type":"a"}]}`, 429},
	} {
		if r := c.h.post(t, "acme", c.path, c.body); r.status != c.status {
			t.Fatalf("request %d: %d %s, want %d", i, r.status, r.body, c.status)
		}
	}
	var got string
	testenv.WaitFor(t, 5*time.Second, "admitted 0.7/s and refused 0.4/s in both servers' stats", func() bool {
		ok := true
		for _, h := range hs {
			var st struct {
				Admission struct {
					Admitted float64 `json:"admitted_rate"`
					Refused  float64 `json:"refused_rate"`
				} `json:"admission"`
			}
			a := h.request(t, http.MethodGet, "/v1/tenants/acme/stats", apiKey("acme"), "", "")
			if json.Unmarshal(a.body, &st) != nil {
				return false
			}
			got = string(a.body)
			ok = ok && st.Admission.Admitted == 0.7 && st.Admission.Refused == 0.4
		}
		return ok
	})
	t.Logf("stats: %s", got)
	if d := rdb.PTTL(context.Background(), keys.AdmissionRate("acme")).Val(); d <= 0 || d > keys.AdmissionRateTTL {
		t.Errorf("admission counters PTTL %v, want (0, %v]", d, keys.AdmissionRateTTL)
	}
}

// TestPausedTenantAdmitsUpToMaxBacklog: a tenant paused in the file (no
// drainer needed: nothing would deliver) is admitted until its backlog
// reaches max_backlog 3, then refused with 429 and Retry-After backlog ÷
// rate, the detail saying the wait counts from the resume.
func TestPausedTenantAdmitsUpToMaxBacklog(t *testing.T) {
	t.Parallel()
	tenant := testenv.Name(t, "held")
	h := startIngest(t, testConfig(t, tenantYAML(tenant, "    outflow: {rate: 1, max_backlog: 3, paused: true}\n")), deps{rdb: testenv.Redis(t)})
	for i := range 3 {
		if r := h.post(t, tenant, "/v1/jobs", `{"type":"a"}`); r.status != http.StatusAccepted {
			t.Fatalf("job %d: %d %s, want 202 while paused", i, r.status, r.body)
		}
	}
	r := h.post(t, tenant, "/v1/jobs", `{"type":"a"}`)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "3" ||
		!strings.Contains(r.json(t)["detail"].(string), "once the tenant's delivery is resumed (it is paused)") {
		t.Errorf("4th job: %d Retry-After %q %s; want 429 after 3 s, saying the tenant is paused", r.status, r.header.Get("Retry-After"), r.body)
	}
}
