package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue/redisq"
)

// adminToken is the visibility tests' admin token (ingest.admin_tokens.ops).
const adminToken = "admin-secret"

// visConfig is a configuration with an admin token and the given tenants,
// each with the outflow and target of body (a YAML fragment indented by
// four spaces).
func visConfig(t testing.TB, body string, tenants ...string) *config.Config {
	t.Helper()
	y := fmt.Sprintf("ingest:\n  admin_tokens: {ops: %q}\ntenants:\n", config.HashKey(adminToken))
	for _, name := range tenants {
		y += tenantYAML(name, body)
	}
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, y)
	}
	return cfg
}

// pastClock is a clock an hour behind, so a job's deadline a minute after
// its "now" has passed already for the drainer.
var pastClock = clock.Func(func() time.Time { return time.Now().Add(-time.Hour) })

// runDrainer runs a Redis-backend drainer for cfg's tenants until the test
// ends and returns its metrics registry.
func runDrainer(t testing.TB, rdb redis.UniversalClient, cfg *config.Config) *prometheus.Registry {
	t.Helper()
	reg, _ := runDrainerStop(t, rdb, cfg)
	return reg
}

// runDrainerStop is runDrainer that also returns a stop func, which waits
// for the drainer's shutdown (deliveries in flight finish).
func runDrainerStop(t testing.TB, rdb redis.UniversalClient, cfg *config.Config) (*prometheus.Registry, func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	d, err := drainer.New(drainer.Config{
		Consumer: mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: 3 * time.Second, Poll: 10 * time.Millisecond})),
		Redis:    rdb, Tenants: cfg.Tenants, Registerer: reg,
		Settings: config.Drainer{Lease: 3 * time.Second, MaxAttempts: 3, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, ShutdownTimeout: 2 * time.Second},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return reg, stop
}

// visSink is a real downstream answering by job id; it counts deliveries.
type visSink struct {
	srv     *httptest.Server
	release chan struct{}
	mu      sync.Mutex
	seen    map[string]int
}

func newVisSink(t testing.TB) *visSink {
	s := &visSink{release: make(chan struct{}), seen: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id := r.Header.Get("Sluice-Job-Id")
		s.mu.Lock()
		s.seen[id]++
		n := s.seen[id]
		s.mu.Unlock()
		switch {
		case id == "slow":
			<-s.release
		case id == "flaky" && n == 1:
			w.WriteHeader(http.StatusInternalServerError)
			return
		case id == "busy" && n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case id == "bad":
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		s.srv.Close()
	})
	return s
}

func (s *visSink) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[id]
}

// jobView is the JSON of GET /v1/jobs/{id}.
type jobView struct {
	JobID      string   `json:"job_id"`
	Tenant     string   `json:"tenant"`
	Type       string   `json:"type"`
	State      string   `json:"state"`
	Position   *int64   `json:"position"`
	ETASeconds *float64 `json:"eta_seconds"`
	Attempt    int      `json:"attempt"`
	EnqueuedAt *string  `json:"enqueued_at"`
	UpdatedAt  *string  `json:"updated_at"`
	LastError  string   `json:"last_error"`
}

// job GETs /v1/jobs/{id}?query with key and decodes a 200.
func (h *harness) job(t testing.TB, key, id, query string) jobView {
	t.Helper()
	a := h.request(t, http.MethodGet, "/v1/jobs/"+id+query, key, "", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET /v1/jobs/%s%s = %d %s, want 200", id, query, a.status, a.body)
	}
	var v jobView
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func ptr[T any](v T) *T { return &v }

// TestJobStatesThroughDrainer submits jobs through the HTTP API and follows
// each through a real drainer and a real HTTP sink: queued with position
// and ETA, cancelled (dropped unsent, counted, backlog lowered), in flight,
// retrying with its last error, done, dead, expired; and the 404, 405 and
// 409 answers.
func TestJobStatesThroughDrainer(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant, other := testenv.Name(t, "vis"), testenv.Name(t, "vis")
	sink := newVisSink(t)
	// 50 jobs/s; adaptive off, so the 503 leaves the rate alone.
	cfg := visConfig(t, fmt.Sprintf("    outflow: {rate: 50, capacity: 1, adaptive: false}\n    target: {url: %q, timeout: 5s}\n", sink.srv.URL), tenant, other)
	h := startIngest(t, cfg, deps{rdb: rdb})
	past := startIngest(t, cfg, deps{rdb: rdb, clock: pastClock})
	key := apiKey(tenant)

	ids := []string{"slow", "flaky", "busy", "bad", "gone", "ok"}
	for _, id := range ids {
		if a := h.post(t, tenant, "/v1/jobs", fmt.Sprintf(`{"type":"mail","id":%q}`, id)); a.status != http.StatusAccepted {
			t.Fatalf("submit %s = %d %s", id, a.status, a.body)
		}
	}
	deadline := pastClock.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	if a := past.post(t, tenant, "/v1/jobs", fmt.Sprintf(`{"type":"mail","id":"late","deadline":%q}`, deadline)); a.status != http.StatusAccepted {
		t.Fatalf("submit late = %d %s", a.status, a.body)
	}
	ids = append(ids, "late")

	// Queued, before any drainer runs: positions in order, ETA = position
	// ÷ 50 jobs/s, exactly.
	for i, id := range ids {
		got := h.job(t, key, id, "")
		want := jobView{JobID: id, Tenant: tenant, Type: "mail", State: "queued", Position: ptr(int64(i)),
			ETASeconds: ptr(float64(i) / 50), EnqueuedAt: got.EnqueuedAt, UpdatedAt: got.UpdatedAt}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GET %s while queued (-want +got):\n%s", id, diff)
		}
		if got.EnqueuedAt == nil || got.UpdatedAt == nil || *got.UpdatedAt != *got.EnqueuedAt {
			t.Errorf("GET %s: enqueued_at %v updated_at %v, want both, equal", id, got.EnqueuedAt, got.UpdatedAt)
		}
	}

	// Who sees what.
	for _, tt := range []struct {
		name, method, path, key string
		status                  int
	}{
		{"another tenant's key", "GET", "/v1/jobs/ok", apiKey(other), 404},
		{"another tenant named by a tenant key", "GET", "/v1/jobs/ok?tenant=" + other, key, 404},
		{"unknown id", "GET", "/v1/jobs/nope", key, 404},
		{"invalid id", "GET", "/v1/jobs/a%20b", key, 404},
		{"no key", "GET", "/v1/jobs/ok", "", 401},
		{"unknown key", "GET", "/v1/jobs/ok", "wrong", 401},
		{"admin naming the tenant", "GET", "/v1/jobs/ok?tenant=" + tenant, adminToken, 200},
		{"admin, tenant found", "GET", "/v1/jobs/ok", adminToken, 200},
		{"admin naming an unknown tenant", "GET", "/v1/jobs/ok?tenant=nobody", adminToken, 404},
		{"tenant named twice", "GET", "/v1/jobs/ok?tenant=" + tenant + "&tenant=" + other, adminToken, 400},
		{"POST", "POST", "/v1/jobs/ok", key, 405},
		{"cancel unknown", "DELETE", "/v1/jobs/nope", key, 404},
		{"cancel another tenant's", "DELETE", "/v1/jobs/ok", apiKey(other), 404},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := h.request(t, tt.method, tt.path, tt.key, "", "")
			if a.status != tt.status {
				t.Errorf("%s %s = %d %s, want %d", tt.method, tt.path, a.status, a.body, tt.status)
			}
			if a.status >= 400 && a.header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("error Content-Type = %q, want application/problem+json", a.header.Get("Content-Type"))
			}
		})
	}

	// Cancel while queued: 200, then 409 naming the state.
	a := h.request(t, http.MethodDelete, "/v1/jobs/gone", key, "", "")
	if diff := cmp.Diff(map[string]any{"job_id": "gone", "state": "cancelled"}, a.json(t)); a.status != 200 || diff != "" {
		t.Errorf("DELETE gone = %d, body (-want +got):\n%s", a.status, diff)
	}
	if v := h.job(t, key, "gone", ""); v.State != "cancelled" || v.Position != nil || v.ETASeconds != nil {
		t.Errorf("GET gone after cancel = %+v, want cancelled with no position or ETA", v)
	}
	if a := h.request(t, http.MethodDelete, "/v1/jobs/gone", key, "", ""); a.status != 409 || !strings.Contains(string(a.body), "is cancelled") {
		t.Errorf("DELETE gone again = %d %s, want 409 naming cancelled", a.status, a.body)
	}

	reg := runDrainer(t, rdb, cfg)
	waitJob := func(id, state string) jobView {
		t.Helper()
		var v jobView
		testenv.WaitFor(t, 5*time.Second, id+" "+state, func() bool { v = h.job(t, key, id, ""); return v.State == state })
		return v
	}
	slow := waitJob("slow", "in_flight")
	if slow.Attempt != 1 || slow.Position != nil {
		t.Errorf("slow in flight: attempt %d position %v, want 1 and null", slow.Attempt, slow.Position)
	}
	if a := h.request(t, http.MethodDelete, "/v1/jobs/slow", key, "", ""); a.status != 409 || !strings.Contains(string(a.body), "is in_flight") {
		t.Errorf("DELETE slow in flight = %d %s, want 409 naming in_flight", a.status, a.body)
	}
	busy := waitJob("busy", "retrying") // 503 with Retry-After: 1
	if !strings.Contains(busy.LastError, "503") {
		t.Errorf("busy retrying: last_error %q, want the 503", busy.LastError)
	}

	want := map[string]jobView{
		"flaky": {State: "done", Attempt: 2, LastError: "drainer: downstream answered 500"},
		"busy":  {State: "done", Attempt: 2, LastError: busy.LastError}, // every start counts, a Retry-After retry too
		"bad":   {State: "dead", Attempt: 1, LastError: "rejected: drainer: permanent failure: 422 Unprocessable Entity"},
		"gone":  {State: "cancelled"},
		"ok":    {State: "done", Attempt: 1},
		"late":  {State: "expired"},
	}
	for id, w := range want {
		got := waitJob(id, w.State)
		if got.Attempt != w.Attempt || got.LastError != w.LastError {
			t.Errorf("%s %s: attempt %d last_error %q, want %d %q", id, w.State, got.Attempt, got.LastError, w.Attempt, w.LastError)
		}
	}
	close(sink.release)
	waitJob("slow", "done")
	testenv.WaitFor(t, 3*time.Second, "backlog 0", func() bool { n, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int(); return n == 0 })
	for _, id := range []string{"gone", "late"} {
		if n := sink.count(id); n != 0 {
			t.Errorf("%s delivered %d times, want never", id, n)
		}
	}
	for _, reason := range []string{"cancelled", "expired"} {
		if n := testenv.MetricValue(t, reg, "sluice_dropped_total", map[string]string{"tenant": tenant, "reason": reason}); n != 1 {
			t.Errorf("sluice_dropped_total{reason=%s} = %v, want 1", reason, n)
		}
	}
	st := h.stats(t, key, tenant)
	if st.Backlog != 0 || st.InFlight != 0 || st.DLQ != 1 || st.ETASeconds == nil || *st.ETASeconds != 0 {
		t.Errorf("stats after the drain = %+v, want backlog 0, in_flight 0, dlq 1, eta 0", st)
	}
}
