package ingest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
	"github.com/sluicehq/sluice/tenants"
)

// The admin tokens of adminConfig.
const (
	aliceToken = "alice-admin-token"
	bobToken   = "bob-admin-token"
)

// adminConfig is testConfig with alice and bob as admins.
func adminConfig(t testing.TB, tenantFragments ...string) *config.Config {
	t.Helper()
	y := "ingest:\n  max_body_bytes: 2048\n  max_batch_jobs: 5\n  retry_after: 2s\n  shutdown_timeout: 5s\n" +
		"  admin_tokens: {alice: " + config.HashKey(aliceToken) + ", bob: " + config.HashKey(bobToken) + "}\n" +
		"tenants:\n" + strings.Join(tenantFragments, "")
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, y)
	}
	return cfg
}

// privateRedis starts a redis-server of the test's own: registries read
// every runtime tenant, so admin tests do not share a keyspace.
func privateRedis(t testing.TB) *redis.Client {
	t.Helper()
	p := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

// watched records when a Registry applied configs.
type watched struct {
	mu   sync.Mutex
	last *config.Config
	at   time.Time
	ch   chan struct{}
}

func (w *watched) apply(c *config.Config) {
	w.mu.Lock()
	w.last, w.at = c, time.Now()
	w.mu.Unlock()
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// waitFor waits at most d until the last applied config satisfies ok and
// returns when it was applied.
func (w *watched) waitFor(t testing.TB, d time.Duration, what string, ok func(*config.Config) bool) time.Time {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		if w.last != nil && ok(w.last) {
			at := w.at
			w.mu.Unlock()
			return at
		}
		w.mu.Unlock()
		select {
		case <-w.ch:
		case <-deadline.C:
			t.Fatalf("%s: not applied within %v", what, d)
		}
	}
}

// runRegistry runs a Registry on rdb over base, applying to apply and to a
// watched recorder, until the test ends.
func runRegistry(t testing.TB, rdb redis.UniversalClient, base *config.Config, reg prometheus.Registerer, apply func(*config.Config)) (*tenants.Registry, *watched) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := tenants.NewRegistry(tenants.RegistryConfig{Redis: rdb, Base: base, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	w := &watched{ch: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx, func(c *config.Config) {
			if apply != nil {
				apply(c)
			}
			w.apply(c)
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r, w
}

// adminIngest is an ingest Server with the admin API, its registry and the
// record of what the registry applied.
type adminIngest struct {
	*harness
	reg  *tenants.Registry
	seen *watched
}

// startAdminIngest runs an ingest Server with a Registry on rdb, as
// cmd/ingest wires them: the registry's merged config goes to SetConfig.
func startAdminIngest(t testing.TB, rdb redis.UniversalClient, base *config.Config, clk clock.Clock) *adminIngest {
	t.Helper()
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	return startAdminIngestOn(t, rdb, base, clk, p)
}

// startAdminIngestOn is startAdminIngest on producer p.
func startAdminIngestOn(t testing.TB, rdb redis.UniversalClient, base *config.Config, clk clock.Clock, p queue.Producer) *adminIngest {
	t.Helper()
	ctx := context.Background()
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	promReg := prometheus.NewRegistry()
	var srv *ingest.Server
	var mu sync.Mutex
	apply := func(c *config.Config) {
		mu.Lock()
		defer mu.Unlock()
		if srv != nil {
			srv.SetConfig(c)
		}
	}
	// The registry first (its metrics on the same Prometheus registry), then
	// the server on the registry's config, then the registry's Run.
	reg, err := tenants.NewRegistry(tenants.RegistryConfig{Redis: rdb, Base: base, Registerer: promReg})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := ingest.New(ingest.Config{
		Settings: reg.Config(), Redis: rdb, Producer: p, Admitter: adm,
		Registerer: promReg, Gatherer: promReg, Clock: clk, Tenants: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	srv = s
	mu.Unlock()
	w := &watched{ch: make(chan struct{}, 1)}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = reg.Run(rctx, func(c *config.Config) { apply(c); w.apply(c) })
	}()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done })
	return &adminIngest{harness: &harness{srv: s, url: hs.URL, reg: promReg}, reg: reg, seen: w}
}

// admin sends an admin request with token ("" for none).
func (h *adminIngest) admin(t testing.TB, method, path, token, body string) answer {
	t.Helper()
	ct := ""
	if body != "" {
		ct = "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
	}
	return h.request(t, method, path, token, ct, body)
}
