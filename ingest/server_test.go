package ingest_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// heldProducer wraps a real producer: each Enqueue announces itself on
// entered and waits for release before enqueueing; Close records when it
// ran.
type heldProducer struct {
	queue.Producer
	entered  chan struct{}
	release  chan struct{}
	enqueued atomic.Int64 // unix ns when the last Enqueue returned
	closed   atomic.Int64 // unix ns when Close ran
}

func (p *heldProducer) Enqueue(ctx context.Context, jobs []queue.Envelope) error {
	p.entered <- struct{}{}
	<-p.release
	err := p.Producer.Enqueue(ctx, jobs)
	p.enqueued.Store(time.Now().UnixNano())
	return err
}

func (p *heldProducer) Close() error {
	p.closed.Store(time.Now().UnixNano())
	return p.Producer.Close()
}

// TestShutdownDrains cancels Serve's context while a request is in flight:
// /readyz turns 503, new connections are refused, the in-flight request
// still gets its 202, and Serve returns nil after closing the producer.
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	inner, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	producer := &heldProducer{Producer: inner, entered: make(chan struct{}), release: make(chan struct{})}
	tenant := testenv.Name(t, "drain")
	srv, _ := newServer(t, testConfig(t, tenantYAML(tenant, "")), deps{rdb: rdb, producer: producer})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	h := &harness{srv: srv, url: "http://" + addr}
	inflight := make(chan answer, 1)
	go func() { inflight <- h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"inflight"}`) }()
	<-producer.entered

	cancel()
	testenv.WaitFor(t, 5*time.Second, "new connections refused", func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "shutting_down") {
		t.Errorf("/readyz during shutdown: %d %s, want 503 shutting_down", rec.Code, rec.Body)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) while a request was in flight", err)
	default:
	}

	close(producer.release)
	a := <-inflight
	if a.status != http.StatusAccepted {
		t.Errorf("in-flight request: status %d, want 202: %s", a.status, a.body)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the in-flight request finished")
	}
	if c, e := producer.closed.Load(), producer.enqueued.Load(); c == 0 || c < e {
		t.Errorf("producer closed at %d, last enqueue returned at %d: want Close after the enqueue", c, e)
	}
	if jobs := queued(t, rdb, tenant); len(jobs) != 1 || jobs[0].ID != "inflight" {
		t.Errorf("queued %v, want the in-flight job", jobs)
	}
}

// TestRunListenError checks that Run reports an address it cannot listen on.
func TestRunListenError(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Ingest.Listen = "127.0.0.1:-1"
	srv, _ := newServer(t, cfg, deps{rdb: testenv.Redis(t)})
	if err := srv.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "ingest: listen on 127.0.0.1:-1") {
		t.Errorf("Run = %v, want a listen error naming the address", err)
	}
}

// TestHealthAndMetrics checks /healthz, /readyz and that /metrics shows the
// request and decision counters.
func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "metrics")
	h := startIngest(t, testConfig(t, tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 1, period: 1h}\n")), deps{rdb: rdb})

	if a := h.request(t, "GET", "/healthz", "", "", ""); a.status != 200 || a.json(t)["status"] != "ok" {
		t.Errorf("/healthz: %d %s", a.status, a.body)
	}
	if a := h.request(t, "GET", "/readyz", "", "", ""); a.status != 200 || !strings.Contains(string(a.body), `"redis":"ok"`) {
		t.Errorf("/readyz: %d %s", a.status, a.body)
	}
	h.post(t, tenant, "/v1/jobs", `{"type":"t"}`)
	h.post(t, tenant, "/v1/jobs", `{"type":"t"}`)
	a := h.request(t, "GET", "/metrics", "", "", "")
	for _, want := range []string{
		`sluice_http_requests_total{code="202",route="jobs"} 1`,
		`sluice_http_requests_total{code="429",route="jobs"} 1`,
		`sluice_admission_decisions_total{algorithm="gcra",result="allowed",tenant="` + tenant + `"} 1`,
		`sluice_admission_decisions_total{algorithm="gcra",result="denied",tenant="` + tenant + `"} 1`,
		`sluice_admission_duration_seconds_count 2`,
		`sluice_http_request_duration_seconds_count{route="jobs"} 2`,
	} {
		if !strings.Contains(string(a.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
