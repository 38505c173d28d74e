package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// newFixedClock returns a clock that only moves when told to, at a fixed
// instant in 2030.
func newFixedClock() *testenv.Clock {
	return testenv.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
}

// apiKey is the test API key of tenant.
func apiKey(tenant string) string { return "key-" + tenant }

// tenantYAML is one tenant's configuration: its key plus body, a YAML
// fragment indented by four spaces (admission, outflow, ...).
func tenantYAML(name, body string) string {
	return fmt.Sprintf("  %s:\n    api_keys: [%q]\n%s", name, config.HashKey(apiKey(name)), body)
}

// testConfig parses a configuration with the given tenants (tenantYAML
// fragments) and small ingest limits: 2 KiB bodies, 5 jobs per batch,
// retry_after 2s.
func testConfig(t testing.TB, tenants ...string) *config.Config {
	t.Helper()
	y := "ingest:\n  max_body_bytes: 2048\n  max_batch_jobs: 5\n  retry_after: 2s\n  shutdown_timeout: 5s\ntenants:\n" + strings.Join(tenants, "")
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, y)
	}
	return cfg
}

// harness is an ingest Server behind an httptest server.
type harness struct {
	srv *ingest.Server
	url string
	reg *prometheus.Registry
}

// deps are what a harness is built on; zero fields get the shared Redis and
// a Redis producer on it.
type deps struct {
	rdb      redis.UniversalClient // admission and idempotency
	producer queue.Producer
	clock    clock.Clock
}

func startIngest(t testing.TB, cfg *config.Config, d deps) *harness {
	t.Helper()
	srv, reg := newServer(t, cfg, d)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &harness{srv: srv, url: hs.URL, reg: reg}
}

// newServer builds a Server of cfg on d (no producer: a Redis producer on
// d.rdb) with an admitter on d.rdb and a registry of its own.
func newServer(t testing.TB, cfg *config.Config, d deps) (*ingest.Server, *prometheus.Registry) {
	t.Helper()
	if d.rdb == nil {
		t.Fatal("newServer: no redis client")
	}
	if d.producer == nil {
		p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: d.rdb})
		if err != nil {
			t.Fatal(err)
		}
		d.producer = p
	}
	reg := prometheus.NewRegistry()
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: d.rdb, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ingest.New(ingest.Config{
		Settings: cfg, Redis: d.rdb, Producer: d.producer, Admitter: adm,
		Registerer: reg, Gatherer: reg, Clock: d.clock,
	})
	if err != nil {
		t.Fatalf("ingest.New: %v", err)
	}
	return srv, reg
}

// answer is a response with its body read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a map.
func (a answer) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer body is not a JSON object: %v: %s", err, a.body)
	}
	return m
}

// request sends method path with body; key "" sends no Authorization (keys
// joined by newlines send one Authorization header each), contentType ""
// sends no Content-Type.
func (h *harness) request(t testing.TB, method, path, key, contentType, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		for _, k := range strings.Split(key, "\n") {
			req.Header.Add("Authorization", "Bearer "+k)
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// post submits body to path as tenant.
func (h *harness) post(t testing.TB, tenant, path, body string) answer {
	t.Helper()
	return h.request(t, http.MethodPost, path, apiKey(tenant), "application/json", body)
}

// queued returns the envelopes on tenant's Redis list.
func queued(t testing.TB, rdb redis.UniversalClient, tenant string) []queue.Envelope {
	t.Helper()
	vals, err := rdb.LRange(context.Background(), keys.Queue(tenant), 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE: %v", err)
	}
	out := make([]queue.Envelope, len(vals))
	for i, v := range vals {
		e, err := queue.Decode([]byte(v))
		if err != nil {
			t.Fatalf("queued job %d: %v", i, err)
		}
		out[i] = e
	}
	return out
}
