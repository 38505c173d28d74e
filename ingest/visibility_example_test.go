package ingest_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue/redisq"
)

// exampleVisibility builds a Server for tenant "example-vis" (key
// "s3cret", outflow 2 jobs/s) on a fresh state and returns its URL.
func exampleVisibility(ctx context.Context, rdb *redis.Client) (string, func()) {
	const t = "example-vis"
	del := []string{keys.Queue(t), keys.Backlog(t), keys.JobSeq(t), keys.JobsDispatched(t), keys.Water(t),
		keys.Delivering(t), keys.Outflow(t), keys.JobIndex(t, "dead"), keys.DeadRecords(t), keys.JobState(t, "report-1"), keys.JobState(t, "report-2"),
		keys.Idempotency(t, "report-1"), keys.Idempotency(t, "report-2")}
	rdb.Del(ctx, del...)
	cfg, err := config.Parse([]byte(`
tenants:
  example-vis:
    api_keys: ["` + config.HashKey("s3cret") + `"]
    outflow: {rate: 2}
`))
	if err != nil {
		log.Fatal(err)
	}
	admitter, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		log.Fatal(err)
	}
	producer, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := ingest.New(ingest.Config{Settings: cfg, Redis: rdb, Producer: producer, Admitter: admitter, Registerer: prometheus.NewRegistry()})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	return hs.URL, func() { hs.Close(); rdb.Del(ctx, del...) }
}

// exampleCall sends method path as the tenant and prints the status and
// body.
func exampleCall(method, url, body string) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer s3cret")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, strings.TrimSpace(string(b)))
}

// ExampleServer_Handler_visibility submits two jobs, reads the second's
// queue position and ETA (1 job ahead at 2 jobs/s), cancels it and reads
// the tenant's stats; no drainer runs, so both jobs still count in the
// backlog.
func ExampleServer_Handler_visibility() {
	ctx := context.Background()
	rdb := exampleRedis()
	defer rdb.Close()
	url, done := exampleVisibility(ctx, rdb)
	defer done()

	for _, id := range []string{"report-1", "report-2"} {
		req, _ := http.NewRequest("POST", url+"/v1/jobs", strings.NewReader(`{"type":"report","id":"`+id+`"}`))
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest("GET", url+"/v1/jobs/report-2", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.Contains(string(b), `"state":"queued","position":1,"eta_seconds":0.5`))

	exampleCall("DELETE", url+"/v1/jobs/report-2", "")
	exampleCall("DELETE", url+"/v1/jobs/report-2", "")
	exampleCall("GET", url+"/v1/tenants/example-vis/stats", "")
	// Output:
	// 200 true
	// 200 {"job_id":"report-2","state":"cancelled"}
	// 409 {"type":"about:blank","title":"Conflict","status":409,"detail":"job \"report-2\" is cancelled; only a queued, retrying or scheduled job can be cancelled","tenant":"example-vis"}
	// 200 {"tenant":"example-vis","backlog":2,"outflow":{"unlimited":false,"configured_rate":2,"effective_rate":2,"measured_rate":0,"capacity":2},"water_level":0,"in_flight":0,"dlq":0,"eta_seconds":1,"paused":false,"admission":{"admitted_rate":0,"refused_rate":0}}
}

// BenchmarkJobState measures GET /v1/jobs/{id} of a queued job through the
// handler: auth, the record and position (one pipelined round trip), the
// tenant's effective rate for the ETA (one script call), the answer.
func BenchmarkJobState(b *testing.B) {
	rdb := testenv.Redis(b)
	tenant := testenv.Name(b, "bvis")
	h := startIngest(b, visConfig(b, "    outflow: {rate: 100}\n", tenant), deps{rdb: rdb})
	if a := h.post(b, tenant, "/v1/jobs", `{"type":"mail","id":"j"}`); a.status != http.StatusAccepted {
		b.Fatalf("submit = %d %s", a.status, a.body)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/jobs/j", nil)
	req.Header.Set("Authorization", "Bearer "+apiKey(tenant))
	handler := h.srv.Handler()
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("GET = %d %s", w.Code, w.Body)
		}
	}
}
