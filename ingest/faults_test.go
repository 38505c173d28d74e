package ingest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue/redisq"
)

// failFast is the most an answer may take while Redis is down or frozen:
// the Redis timeout (250ms) and a dial, with room for a loaded machine.
const failFast = 1500 * time.Millisecond

// limiterClient is a client of a private Redis set up as cmd/ingest sets up
// its own: every command bounded by the 250ms Redis timeout, none sent again, no
// dial retries.
func limiterClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: addr, DialTimeout: 250 * time.Millisecond,
		ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond,
		MaxRetries: -1, DialerRetries: 1, // as boot.Redis
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// timedPost posts and fails the test when the answer took longer than
// failFast.
func timedPost(t *testing.T, h *harness, tenant, body string) answer {
	t.Helper()
	start := time.Now()
	a := h.post(t, tenant, "/v1/jobs", body)
	d := time.Since(start)
	if d > failFast {
		t.Errorf("answer took %v, want under %v", d, failFast)
	}
	t.Logf("%s: %d in %v", tenant, a.status, d.Round(time.Millisecond))
	return a
}

// TestRedisDown stops the Redis that holds the limits in the middle of the
// test. The tenant that fails open gets 202s up to its in-process bound and
// then 429s; the tenant that fails closed gets 503 + Retry-After; both fast.
// Freezing Redis (SIGSTOP) gives the same answers within the timeout. When
// Redis comes back (empty, so the script must be reloaded), both recover
// without restarting ingest. The jobs go to another Redis, which stays up.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	limiter := testenv.StartRedis(t)
	rdb := limiterClient(t, limiter.Addr())
	jobs := testenv.Redis(t)
	producer, err := redisq.NewProducer(redisq.ProducerConfig{Redis: jobs})
	if err != nil {
		t.Fatal(err)
	}
	open, closed := testenv.Name(t, "open"), testenv.Name(t, "closed")
	cfg := testConfig(t,
		tenantYAML(open, "    admission: {algorithm: gcra, limit: 3, period: 1h}\n    on_limiter_error: allow\n"),
		tenantYAML(closed, "    admission: {algorithm: gcra, limit: 100, period: 1s}\n    on_limiter_error: deny\n"))
	h := startIngest(t, cfg, deps{rdb: rdb, producer: producer})

	for _, tenant := range []string{open, closed} {
		if a := h.post(t, tenant, "/v1/jobs", `{"type":"t"}`); a.status != 202 {
			t.Fatalf("%s with Redis up: %d %s", tenant, a.status, a.body)
		}
	}

	limiter.Stop()
	// The in-process bucket of the open tenant starts full: 3 of them.
	for i := range 3 {
		a := timedPost(t, h, open, `{"type":"t"}`)
		if a.status != 202 {
			t.Fatalf("open tenant, Redis down, job %d: status %d, want 202: %s", i, a.status, a.body)
		}
		if want := `"tenant";r=` + string(rune('2'-i)); !strings.HasPrefix(a.header.Get("RateLimit"), want) {
			t.Errorf("open tenant job %d: RateLimit = %q, want %s...", i, a.header.Get("RateLimit"), want)
		}
	}
	a := timedPost(t, h, open, `{"type":"t"}`)
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
		t.Fatalf("open tenant past its local bound: status %d, Retry-After %q, want 429 with one: %s", a.status, a.header.Get("Retry-After"), a.body)
	}
	a = timedPost(t, h, closed, `{"type":"t"}`)
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "2" || a.json(t)["backend"] != "redis" {
		t.Fatalf("closed tenant, Redis down: status %d, Retry-After %q, body %s; want 503, 2, backend redis", a.status, a.header.Get("Retry-After"), a.body)
	}
	if got := testenv.MetricValue(t, h.reg, "sluice_fail_open_total", map[string]string{"tenant": open}); got != 4 {
		t.Errorf("sluice_fail_open_total{tenant=%s} = %v, want 4", open, got)
	}
	ready := h.request(t, http.MethodGet, "/readyz", "", "", "")
	if ready.status != 503 || !strings.Contains(string(ready.body), `"redis"`) {
		t.Errorf("/readyz with Redis down: %d %s, want 503 naming redis", ready.status, ready.body)
	}
	if n := len(queued(t, jobs, open)); n != 4 {
		t.Errorf("%d jobs of the open tenant queued, want 4 (1 + 3 failed open)", n)
	}

	limiter.Start() // empty: no script, no limit state
	testenv.WaitFor(t, 10*time.Second, "closed tenant accepted again after Redis restart", func() bool {
		return h.post(t, closed, "/v1/jobs", `{"type":"t"}`).status == 202
	})
	if a := h.post(t, open, "/v1/jobs", `{"type":"t"}`); a.status != 202 {
		t.Errorf("open tenant after Redis restart: %d %s, want 202 (fresh limits)", a.status, a.body)
	}

	limiter.Pause()
	a = timedPost(t, h, closed, `{"type":"t"}`)
	if a.status != http.StatusServiceUnavailable {
		t.Errorf("closed tenant, Redis frozen: status %d, want 503: %s", a.status, a.body)
	}
	a = timedPost(t, h, open, `{"type":"t"}`)
	if a.status != http.StatusTooManyRequests {
		t.Errorf("open tenant, Redis frozen, local bound spent: status %d, want 429: %s", a.status, a.body)
	}
	limiter.Resume()
	testenv.WaitFor(t, 10*time.Second, "closed tenant accepted again after Redis resumed", func() bool {
		return h.post(t, closed, "/v1/jobs", `{"type":"t"}`).status == 202
	})
	if ready := h.request(t, http.MethodGet, "/readyz", "", "", ""); ready.status != 200 {
		t.Errorf("/readyz after recovery: %d %s", ready.status, ready.body)
	}
}

// TestIdempotencyWithRedisDown checks that a client id does not turn a
// fail-open tenant into a failing one, and that a fail-closed tenant gets a
// 503 for it.
func TestIdempotencyWithRedisDown(t *testing.T) {
	t.Parallel()
	limiter := testenv.StartRedis(t)
	rdb := limiterClient(t, limiter.Addr())
	jobs := testenv.Redis(t)
	producer, err := redisq.NewProducer(redisq.ProducerConfig{Redis: jobs})
	if err != nil {
		t.Fatal(err)
	}
	open, closed := testenv.Name(t, "open"), testenv.Name(t, "closed")
	cfg := testConfig(t,
		tenantYAML(open, "    on_limiter_error: allow\n"),
		tenantYAML(closed, "    on_limiter_error: deny\n"))
	h := startIngest(t, cfg, deps{rdb: rdb, producer: producer})
	limiter.Stop()
	if a := timedPost(t, h, open, `{"type":"t","id":"x1"}`); a.status != 202 || a.json(t)["job_id"] != "x1" {
		t.Errorf("open tenant with an id, Redis down: %d %s, want 202 with job_id x1", a.status, a.body)
	}
	if a := timedPost(t, h, closed, `{"type":"t","id":"x1"}`); a.status != 503 || a.header.Get("Retry-After") == "" {
		t.Errorf("closed tenant with an id, Redis down: %d %s, want 503 + Retry-After", a.status, a.body)
	}
}
