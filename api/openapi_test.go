// Package api holds sluice's OpenAPI 3.1 description (openapi.yaml) and the
// tests that check the running HTTP handlers against it.
package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue/redisq"
	"github.com/sluicehq/sluice/tenants"
)

// Credentials of the test configuration.
const (
	adminToken = "openapi-admin-token"
	keyA       = "openapi-key-a"
	keyB       = "openapi-key-b"
)

// server is a real ingest handler (admin API and all) on a private Redis,
// with the Redis queue backend, and the record of what the checks saw.
type server struct {
	url     string
	redis   *testenv.RedisProc
	rdb     *redis.Client
	spec    *spec
	tenantA string
	tenantB string

	// limitState lists the operations whose authenticated answers (but
	// 401 and 503) must carry every limit header.
	limitState map[string]bool

	mu      sync.Mutex
	covered map[string]map[int]bool // "METHOD template" → statuses seen
}

// startServer configures tenant A (gcra: 3 at once, then 1 a minute; fails
// closed), tenant B, and one admin, and serves ingest on a private Redis,
// which the Redis-down checks stop at the end.
func startServer(t *testing.T) *server {
	t.Helper()
	s := &server{spec: loadSpec(t), covered: map[string]map[int]bool{},
		tenantA: testenv.Name(t, "oa"), tenantB: testenv.Name(t, "ob")}
	s.redis = testenv.StartRedis(t)
	// Bounded like cmd/ingest's client, so a stopped Redis answers fast.
	s.rdb = redis.NewClient(&redis.Options{Addr: s.redis.Addr(), DialTimeout: 250 * time.Millisecond,
		ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond, MaxRetries: 1, DialerRetries: 1})
	t.Cleanup(func() { s.rdb.Close() })
	y := fmt.Sprintf(`ingest:
  max_body_bytes: 2048
  max_batch_jobs: 5
  admin_tokens: {ops: %q}
tenants:
  %s:
    api_keys: [%q]
    admission: {algorithm: gcra, limit: 1, period: 1m, burst: 3}
    outflow: {rate: 5, max_backlog: 100}
    target: {url: "http://127.0.0.1:9/hook"}
    on_limiter_error: deny
  %s:
    api_keys: [%q]
    admission: {algorithm: fixed_window, limit: 100, period: 1m}
    target: {url: "http://127.0.0.1:9/hook"}
`, config.HashKey(adminToken), s.tenantA, config.HashKey(keyA), s.tenantB, config.HashKey(keyB))
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, y)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reg, err := tenants.NewRegistry(tenants.RegistryConfig{Redis: s.rdb, Base: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	producer, err := redisq.NewProducer(redisq.ProducerConfig{Redis: s.rdb})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: s.rdb})
	if err != nil {
		t.Fatal(err)
	}
	prom := prometheus.NewRegistry()
	srv, err := ingest.New(ingest.Config{Settings: reg.Config(), Redis: s.rdb, Producer: producer, Admitter: adm,
		Registerer: prom, Gatherer: prom, Tenants: reg})
	if err != nil {
		t.Fatalf("ingest.New: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = reg.Run(ctx, srv.SetConfig) }()
	t.Cleanup(func() { cancel(); <-done })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	s.url = hs.URL
	return s
}

// req is one request of the checks.
type req struct {
	method, path string
	auth         string // bearer token; "" sends none
	ctype        string // Content-Type; "" sends application/json with a body
	body         string
	header       map[string]string // more request headers
	chunked      bool              // send the body chunked, without a Content-Length
}

// send sends r and returns its answer.
func (s *server) send(t *testing.T, r req) answer {
	t.Helper()
	var body io.Reader
	switch {
	case r.chunked:
		body = io.MultiReader(strings.NewReader(r.body)) // no length known: chunked
	case r.body != "":
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequest(r.method, s.url+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.auth != "" {
		hr.Header.Set("Authorization", "Bearer "+r.auth)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	switch {
	case r.ctype != "":
		hr.Header.Set("Content-Type", r.ctype)
	case r.body != "":
		hr.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{method: r.method, path: strings.SplitN(r.path, "?", 2)[0], status: resp.StatusCode, header: resp.Header, body: b}
}

// expect sends r, requires status want, and checks the answer against the
// spec; it returns the answer for the next steps.
func (s *server) expect(t *testing.T, what string, want int, r req) answer {
	t.Helper()
	a := s.send(t, r)
	if a.status != want {
		t.Errorf("%s: %s %s → %d, want %d: %s", what, r.method, r.path, a.status, want, a.body)
	}
	problems, op := s.spec.check(a)
	for _, p := range problems {
		t.Errorf("%s: %s", what, p)
	}
	if s.limitState[op] && r.auth != "" && a.status != 401 && a.status != 503 {
		for _, h := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			if a.header.Get(h) == "" {
				t.Errorf("%s: %s %s → %d has no %s header", what, r.method, r.path, a.status, h)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op != "" && a.status == want {
		if s.covered[op] == nil {
			s.covered[op] = map[int]bool{}
		}
		s.covered[op][a.status] = true
	}
	return a
}

// jobID reads job_id from a 202 answer.
func jobID(t *testing.T, a answer) string {
	t.Helper()
	m := regexp.MustCompile(`"job_id":"([^"]+)"`).FindSubmatch(a.body)
	if m == nil {
		t.Fatalf("no job_id in %s", a.body)
	}
	return string(m[1])
}

// TestHandlersMatchSpec exercises every documented operation of a real
// ingest handler, checks each answer (status documented, body valid against
// its schema, headers), and then that no route the server answers is
// missing from the spec.
func TestHandlersMatchSpec(t *testing.T) {
	s := startServer(t)
	a, b := s.tenantA, s.tenantB
	job := func(body string) req { return req{method: "POST", path: "/v1/jobs", auth: keyA, body: body} }
	// Every authenticated answer of a tenant with a policy carries the
	// limit state (ADR 0004), not only 202s and 429s.
	s.limitState = map[string]bool{"POST /v1/jobs": true, "POST /v1/jobs:batch": true}
	batch := func(body string) req { return req{method: "POST", path: "/v1/jobs:batch", auth: keyA, body: body} }

	t.Run("ops", func(t *testing.T) {
		s.expect(t, "healthz", 200, req{method: "GET", path: "/healthz"})
		s.expect(t, "readyz", 200, req{method: "GET", path: "/readyz"})
		s.expect(t, "metrics", 200, req{method: "GET", path: "/metrics"})
	})

	var queuedID string
	t.Run("jobs", func(t *testing.T) {
		queuedID = jobID(t, s.expect(t, "accepted", 202, job(`{"type":"email","id":"first","payload":{"to":"a@example.com"}}`)))
		replay := s.expect(t, "replayed", 202, job(`{"type":"email","id":"first"}`))
		if replay.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay: Idempotent-Replayed = %q, want true", replay.header.Get("Idempotent-Replayed"))
		}
		s.expect(t, "no key", 401, req{method: "POST", path: "/v1/jobs", body: `{"type":"email"}`})
		s.expect(t, "malformed", 400, job(`{"type":`))
		s.expect(t, "unknown field", 400, job(`{"type":"email","dedline":"x"}`))
		s.expect(t, "field in another case", 400, job(`{"TYPE":"email"}`))
		s.expect(t, "repeated field", 400, job(`{"type":"email","cost":1,"cost":2}`))
		s.expect(t, "gzip body", 415, req{method: "POST", path: "/v1/jobs", auth: keyA, body: `{"type":"email"}`, header: map[string]string{"Content-Encoding": "gzip"}})
		s.expect(t, "chunked body", 411, req{method: "POST", path: "/v1/jobs", auth: keyA, body: `{"type":"email"}`, chunked: true})
		s.expect(t, "batch chunked body", 411, req{method: "POST", path: "/v1/jobs:batch", auth: keyA, body: `{"jobs":[{"type":"email"}]}`, chunked: true})
		s.expect(t, "text body", 415, req{method: "POST", path: "/v1/jobs", auth: keyA, ctype: "text/plain", body: "hi"})
		s.expect(t, "no type", 422, job(`{"payload":1}`))
		s.expect(t, "too large", 413, job(`{"type":"email","payload":"`+strings.Repeat("x", 3000)+`"}`))
		if err := s.rdb.Set(context.Background(), keys.Idempotency(a, "held"), "pending", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		s.expect(t, "id in progress", 409, job(`{"type":"email","id":"held"}`))
		s.expect(t, "batch", 202, batch(`{"jobs":[{"type":"email"},{"type":"sms","cost":1}]}`))
		s.expect(t, "batch replayed", 202, batch(`{"jobs":[{"type":"email","id":"first"}]}`))
		s.expect(t, "empty batch", 422, batch(`{"jobs":[]}`))
		s.expect(t, "batch over max_batch_jobs", 413, batch(`{"jobs":[{"type":"a"},{"type":"a"},{"type":"a"},{"type":"a"},{"type":"a"},{"type":"a"}]}`))
		s.expect(t, "batch malformed", 400, batch(`{"jobs":[{"type":1}]}`))
		s.expect(t, "batch no key", 401, req{method: "POST", path: "/v1/jobs:batch", body: `{"jobs":[{"type":"a"}]}`})
		s.expect(t, "batch text body", 415, req{method: "POST", path: "/v1/jobs:batch", auth: keyA, ctype: "text/plain", body: "hi"})
		s.expect(t, "batch id in progress", 409, batch(`{"jobs":[{"type":"email","id":"held"}]}`))
		// The burst of 3 is spent (first, and the batch of 2).
		s.expect(t, "over the limit", 429, job(`{"type":"email"}`))
		s.expect(t, "batch over the limit", 429, batch(`{"jobs":[{"type":"email"}]}`))
	})

	t.Run("visibility", func(t *testing.T) {
		statsA := "/v1/tenants/" + a + "/stats"
		s.expect(t, "stats, tenant key", 200, req{method: "GET", path: statsA, auth: keyA})
		s.expect(t, "stats, admin token", 200, req{method: "GET", path: statsA, auth: adminToken})
		s.expect(t, "stats of another tenant", 404, req{method: "GET", path: statsA, auth: keyB})
		s.expect(t, "stats, no key", 401, req{method: "GET", path: statsA})
		s.expect(t, "stats, unknown tenant", 404, req{method: "GET", path: "/v1/tenants/nosuch-" + a + "/stats", auth: adminToken})
		s.expect(t, "job", 200, req{method: "GET", path: "/v1/jobs/" + queuedID, auth: keyA})
		s.expect(t, "job, no key", 401, req{method: "GET", path: "/v1/jobs/" + queuedID})
		s.expect(t, "unknown job", 404, req{method: "GET", path: "/v1/jobs/nosuch", auth: keyA})
		s.expect(t, "another tenant's job", 404, req{method: "GET", path: "/v1/jobs/" + queuedID, auth: keyB})
		s.expect(t, "job, admin token, found in every tenant", 200, req{method: "GET", path: "/v1/jobs/" + queuedID, auth: adminToken})
		s.expect(t, "job, admin token, named tenant", 200, req{method: "GET", path: "/v1/jobs/" + queuedID + "?tenant=" + a, auth: adminToken})
		// The same client id in both tenants: an admin must say which.
		s.expect(t, "same id in tenant B", 202, req{method: "POST", path: "/v1/jobs", auth: keyB, body: `{"type":"email","id":"` + queuedID + `"}`})
		s.expect(t, "job, admin token, ambiguous", 400, req{method: "GET", path: "/v1/jobs/" + queuedID, auth: adminToken})
		s.expect(t, "cancel, admin token, ambiguous", 400, req{method: "DELETE", path: "/v1/jobs/" + queuedID, auth: adminToken})
		s.expect(t, "cancel", 200, req{method: "DELETE", path: "/v1/jobs/" + queuedID, auth: keyA})
		s.expect(t, "cancel again", 409, req{method: "DELETE", path: "/v1/jobs/" + queuedID, auth: keyA})
		s.expect(t, "cancel unknown", 404, req{method: "DELETE", path: "/v1/jobs/nosuch", auth: keyA})
		s.expect(t, "cancel, no key", 401, req{method: "DELETE", path: "/v1/jobs/" + queuedID})
		s.expect(t, "cancel, admin token", 200, req{method: "DELETE", path: "/v1/jobs/" + queuedID + "?tenant=" + b, auth: adminToken})
	})

	t.Run("admin", func(t *testing.T) {
		n := testenv.Name(t, "on")
		tp := "/admin/v1/tenants/" + n
		spec := `{"api_keys":["` + config.HashKey("k-"+n) + `"],"admission":{"algorithm":"gcra","limit":10,"period":"1s","burst":5},
			"outflow":{"rate":5,"max_backlog":1000},"target":{"url":"http://127.0.0.1:9/hook","timeout":"5s"}}`
		admin := func(method, path, body string) req {
			return req{method: method, path: path, auth: adminToken, body: body}
		}
		s.expect(t, "list", 200, admin("GET", "/admin/v1/tenants", ""))
		s.expect(t, "list, tenant key", 401, req{method: "GET", path: "/admin/v1/tenants", auth: keyA})
		s.expect(t, "get config tenant", 200, admin("GET", "/admin/v1/tenants/"+b, ""))
		s.expect(t, "get, no token", 401, req{method: "GET", path: "/admin/v1/tenants/" + b})
		s.expect(t, "get unknown", 404, admin("GET", tp, ""))
		created := s.expect(t, "create", 201, admin("PUT", tp, spec))
		if loc := created.header.Get("Location"); loc != tp {
			t.Errorf("create: Location = %q, want %q", loc, tp)
		}
		s.expect(t, "replace", 200, admin("PUT", tp, spec))
		s.expect(t, "put invalid", 422, admin("PUT", tp, `{"outflow":{"rate":-1}}`))
		s.expect(t, "put unknown key", 422, admin("PUT", tp, `{"outflw":{}}`))
		s.expect(t, "put key in another case", 422, admin("PUT", tp, `{"Outflow":{}}`))
		s.expect(t, "put repeated key", 422, admin("PUT", tp, `{"outflow":{"rate":1,"rate":2}}`))
		s.expect(t, "put gzip", 415, req{method: "PUT", path: tp, auth: adminToken, body: spec, header: map[string]string{"Content-Encoding": "gzip"}})
		s.expect(t, "put chunked", 411, req{method: "PUT", path: tp, auth: adminToken, body: spec, chunked: true})
		s.expect(t, "patch chunked", 411, req{method: "PATCH", path: tp, auth: adminToken, body: `{}`, chunked: true})
		s.expect(t, "put malformed", 400, admin("PUT", tp, `{"outflow":`))
		s.expect(t, "put text", 415, req{method: "PUT", path: tp, auth: adminToken, ctype: "text/plain", body: "x"})
		s.expect(t, "put too large", 413, admin("PUT", tp, `{"api_keys":["`+strings.Repeat("x", 3000)+`"]}`))
		s.expect(t, "put, tenant key", 401, req{method: "PUT", path: tp, auth: keyA, body: spec})
		s.expect(t, "patch", 200, req{method: "PATCH", path: tp, auth: adminToken, ctype: "application/merge-patch+json", body: `{"outflow":{"rate":20}}`})
		s.expect(t, "patch as json", 200, admin("PATCH", tp, `{"outflow":{"capacity":20}}`))
		s.expect(t, "patch invalid", 422, admin("PATCH", tp, `{"outflow":{"rate":-1}}`))
		s.expect(t, "patch malformed", 400, admin("PATCH", tp, `{`))
		s.expect(t, "patch text", 415, req{method: "PATCH", path: tp, auth: adminToken, ctype: "text/plain", body: "x"})
		s.expect(t, "patch too large", 413, admin("PATCH", tp, `{"target":{"url":"`+strings.Repeat("x", 3000)+`"}}`))
		s.expect(t, "patch unknown", 404, admin("PATCH", tp+"-nosuch", `{"outflow":{"rate":1}}`))
		s.expect(t, "patch, no token", 401, req{method: "PATCH", path: tp, body: `{}`})
		s.expect(t, "audit", 200, admin("GET", tp+"/audit", ""))
		s.expect(t, "audit, limit", 200, admin("GET", tp+"/audit?limit=1", ""))
		s.expect(t, "audit, limit and cursor", 200, admin("GET", tp+"/audit?limit=1&cursor=2", ""))
		s.expect(t, "audit, bad limit", 400, admin("GET", tp+"/audit?limit=0", ""))
		s.expect(t, "audit, limit above the page", 400, admin("GET", tp+"/audit?limit=101", ""))
		s.expect(t, "audit, bad cursor", 400, admin("GET", tp+"/audit?cursor=x", ""))
		s.expect(t, "audit, no token", 401, req{method: "GET", path: tp + "/audit"})
		s.expect(t, "audit, invalid id", 404, admin("GET", "/admin/v1/tenants/no*such/audit", ""))
		s.expect(t, "delete", 204, admin("DELETE", tp, ""))
		s.expect(t, "audit after delete", 200, admin("GET", tp+"/audit", ""))
		s.expect(t, "delete again", 404, admin("DELETE", tp, ""))
		s.expect(t, "delete, no token", 401, req{method: "DELETE", path: tp})
	})

	t.Run("web console", func(t *testing.T) { s.checkConsole(t) })
	t.Run("every route is documented", func(t *testing.T) { s.checkRoutes(t) })

	t.Run("redis down", func(t *testing.T) {
		s.redis.Stop()
		s.expect(t, "readyz", 503, req{method: "GET", path: "/readyz"})
		s.expect(t, "fail-closed job", 503, job(`{"type":"email"}`))
		s.expect(t, "fail-closed batch", 503, batch(`{"jobs":[{"type":"email"}]}`))
		s.expect(t, "stats", 503, req{method: "GET", path: "/v1/tenants/" + a + "/stats", auth: keyA})
		s.expect(t, "job", 503, req{method: "GET", path: "/v1/jobs/x", auth: keyA})
		s.expect(t, "cancel", 503, req{method: "DELETE", path: "/v1/jobs/x", auth: keyA})
		s.expect(t, "admin list", 503, req{method: "GET", path: "/admin/v1/tenants", auth: adminToken})
		tb := "/admin/v1/tenants/" + b
		s.expect(t, "admin put", 503, req{method: "PUT", path: tb, auth: adminToken, body: `{"target":{"url":"http://127.0.0.1:9/hook"}}`})
		s.expect(t, "admin get", 503, req{method: "GET", path: tb, auth: adminToken})
		s.expect(t, "admin patch", 503, req{method: "PATCH", path: tb, auth: adminToken, body: `{"outflow":{"rate":1}}`})
		s.expect(t, "admin delete", 503, req{method: "DELETE", path: tb, auth: adminToken})
		s.expect(t, "admin audit", 503, req{method: "GET", path: tb + "/audit", auth: adminToken})
		s.checkConsoleDown(t)
	})

	s.reportCoverage(t)
}
