package ingest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// schedHarness is an ingest of one tenant on backend be ("redis" or
// "kafka"), with ingest settings extra (YAML lines under ingest:), and a
// reader of the ordinary jobs that reached the backend.
func schedHarness(t *testing.T, be, tenant, extra string) (*harness, redis.UniversalClient, func(want int) []string) {
	t.Helper()
	rdb := testenv.Redis(t)
	t.Cleanup(func() { rdb.ZRem(context.Background(), keys.ScheduledTenants(), tenant) })
	cfg := testConfig(t, tenantYAML(tenant, ""))
	if extra != "" {
		cfg = testConfigWith(t, extra, tenantYAML(tenant, ""))
	}
	if be == "redis" {
		h := startIngest(t, cfg, deps{rdb: rdb})
		return h, rdb, func(int) []string {
			var ids []string
			for _, e := range queued(t, rdb, tenant) {
				ids = append(ids, e.ID)
			}
			return ids
		}
	}
	brokers := testenv.KafkaBrokers(t)
	p, topic := kafkaProducer(t, brokers)
	cfg.Queue.Backend, cfg.Kafka.Brokers, cfg.Kafka.Topic = "kafka", brokers, topic
	h := startIngest(t, cfg, deps{rdb: rdb, producer: p})
	return h, rdb, func(want int) []string {
		var ids []string
		for id := range topicJobs(t, brokers, topic, want) {
			ids = append(ids, id)
		}
		return ids
	}
}

// testConfigWith is testConfig with more ingest settings.
func testConfigWith(t *testing.T, ingestLines string, tenants ...string) *config.Config {
	t.Helper()
	y := "ingest:\n  max_body_bytes: 2048\n  max_batch_jobs: 5\n  retry_after: 2s\n  shutdown_timeout: 5s\n" + ingestLines + "tenants:\n" + strings.Join(tenants, "")
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, y)
	}
	return cfg
}

// TestScheduledSubmission, on both backends: a batch of a scheduled job
// ("delay") and an ordinary one answers 202 with the scheduled one's due_at;
// only the ordinary job reaches the queue backend, the scheduled one is in
// the tenant's scheduled index with state scheduled and due_at in GET, and
// DELETE cancels it (out of the index and hash). A not_before in the past is
// an ordinary job.
func TestScheduledSubmission(t *testing.T) {
	t.Parallel()
	for _, be := range []string{"redis", "kafka"} {
		t.Run(be, func(t *testing.T) {
			t.Parallel()
			tenant := testenv.Name(t, "sub")
			h, rdb, onBackend := schedHarness(t, be, tenant, "")
			ctx := context.Background()
			past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
			a := h.post(t, tenant, "/v1/jobs:batch", `{"jobs":[{"type":"t","id":"later","delay":"1h"},{"type":"t","id":"now"},{"type":"t","id":"past","not_before":"`+past+`"}]}`)
			if a.status != http.StatusAccepted {
				t.Fatalf("batch: %d %s", a.status, a.body)
			}
			jobs, _ := a.json(t)["jobs"].([]any)
			first, _ := jobs[0].(map[string]any)
			due, err := time.Parse(time.RFC3339Nano, first["due_at"].(string))
			if err != nil || due.Sub(time.Now().Add(time.Hour)).Abs() > 5*time.Second {
				t.Errorf("scheduled answer %v: due_at %v (%v), want about now + 1h", first, due, err)
			}
			if second, _ := jobs[1].(map[string]any); second["due_at"] != nil {
				t.Errorf("ordinary answer %v has a due_at", second)
			}
			got := onBackend(2)
			if len(got) != 2 || strings.Contains(strings.Join(got, ","), "later") {
				t.Errorf("jobs on the backend %v, want now and past only", got)
			}
			if s, err := rdb.ZScore(ctx, keys.JobIndex(tenant, "scheduled"), "later").Result(); err != nil || int64(s) != due.UnixMilli() {
				t.Errorf("scheduled index score %v (%v), want %d", int64(s), err, due.UnixMilli())
			}
			g := h.request(t, "GET", "/v1/jobs/later", apiKey(tenant), "", "").json(t)
			if g["state"] != "scheduled" || g["due_at"] == nil || g["position"] != nil {
				t.Errorf("GET scheduled job: %v, want state scheduled with due_at, no position", g)
			}
			if d := h.request(t, "DELETE", "/v1/jobs/later", apiKey(tenant), "", ""); d.status != 200 || d.json(t)["state"] != "cancelled" {
				t.Errorf("DELETE scheduled job: %d %s, want 200 cancelled", d.status, d.body)
			}
			if n, _ := rdb.ZCard(ctx, keys.JobIndex(tenant, "scheduled")).Result(); n != 0 {
				t.Errorf("scheduled index holds %d after the cancel, want 0", n)
			}
			if g := h.request(t, "GET", "/v1/jobs/later", apiKey(tenant), "", "").json(t); g["state"] != "cancelled" || g["due_at"] != nil {
				t.Errorf("GET after the cancel: %v, want cancelled without due_at", g)
			}
		})
	}
}

// TestScheduledRefusals: not_before with delay, a due time beyond
// ingest.max_delay, a negative delay, malformed values, a deadline before the
// due time, a heartbeat out of bounds, and a tenant over
// ingest.max_scheduled are refused, naming the field or the bound.
func TestScheduledRefusals(t *testing.T) {
	t.Parallel()
	tenant := testenv.Name(t, "refuse")
	h, _, _ := schedHarness(t, "redis", tenant, "  max_delay: 2h\n  max_scheduled: 1\n")
	soon := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	far := time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		body   string
		status int
		field  string
		detail string
	}{
		{`{"type":"t","not_before":"` + soon + `","delay":"1m"}`, 422, "not_before,delay", "not_before and delay are both given"},
		{`{"type":"t","delay":"3h"}`, 422, "delay", "ingest.max_delay (2h0m0s)"},
		{`{"type":"t","not_before":"` + far + `"}`, 422, "not_before", "ingest.max_delay (2h0m0s)"},
		{`{"type":"t","delay":"-1s"}`, 422, "delay", "must be >= 0"},
		{`{"type":"t","delay":"soon"}`, 400, "delay", "Go duration"},
		{`{"type":"t","not_before":"tomorrow"}`, 400, "not_before", "RFC 3339"},
		{`{"type":"t","delay":"1h","deadline":"` + soon + `"}`, 422, "deadline", "after the due time"},
		{`{"type":"t","heartbeat":"500ms"}`, 422, "heartbeat", "between 1s and 24h0m0s"},
		{`{"type":"t","heartbeat":"25h"}`, 422, "heartbeat", "between 1s and 24h0m0s"},
		{`{"jobs":[{"type":"t"},{"type":"t","heartbeat":"x"}]}`, 400, "jobs[1].heartbeat", "Go duration"},
		{`{"type":"t","Delay":"1m"}`, 400, "Delay", "unknown field"},
		{`{"type":"t","delay":"1m","delay":"2m"}`, 400, "delay", "more than once"},
	}
	for _, c := range cases {
		path := "/v1/jobs"
		if strings.HasPrefix(c.body, `{"jobs"`) {
			path = "/v1/jobs:batch"
		}
		a := h.post(t, tenant, path, c.body)
		m := a.json(t)
		if a.status != c.status || m["field"] != c.field || !strings.Contains(m["detail"].(string), c.detail) {
			t.Errorf("%s: %d %s, want %d field %q detail containing %q", c.body, a.status, a.body, c.status, c.field, c.detail)
		}
	}
	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","delay":"1h"}`); a.status != 202 {
		t.Fatalf("first scheduled job: %d %s", a.status, a.body)
	}
	a := h.post(t, tenant, "/v1/jobs", `{"type":"t","delay":"1h"}`)
	if m := a.json(t); a.status != 429 || !strings.Contains(m["detail"].(string), "ingest.max_scheduled (1)") || m["limit"] != float64(1) {
		t.Errorf("second scheduled job over max_scheduled 1: %d %s, want 429 naming ingest.max_scheduled", a.status, a.body)
	}
}

// TestScheduledIdempotent: a scheduled job submitted twice with one client
// id is stored once and the second answer is the first, replayed.
func TestScheduledIdempotent(t *testing.T) {
	t.Parallel()
	tenant := testenv.Name(t, "idem")
	h, rdb, _ := schedHarness(t, "redis", tenant, "")
	body := `{"type":"t","id":"once","delay":"10m"}`
	a1, a2 := h.post(t, tenant, "/v1/jobs", body), h.post(t, tenant, "/v1/jobs", body)
	if a1.status != 202 || a2.status != 202 || string(a1.body) != string(a2.body) || a2.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("answers %d %s / %d %s (replayed %q), want the same 202 replayed", a1.status, a1.body, a2.status, a2.body, a2.header.Get("Idempotent-Replayed"))
	}
	if n, _ := rdb.HLen(context.Background(), keys.ScheduledJobs(tenant)).Result(); n != 1 {
		t.Errorf("scheduled hash holds %d, want 1", n)
	}
}

// TestScheduledJobsPassTheBacklogGate: max_backlog counts the jobs queued
// now; a scheduled job joins the backlog only when it is due and moved, so
// a full backlog does not refuse it (it refused one due in a week, with a
// Retry-After for the backlog to drain), while the immediate jobs of the
// same request, and a job due within a minute (no way past the gate), are
// still gated, and a scheduled job costlier than max_backlog is no 422.
func TestScheduledJobsPassTheBacklogGate(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "sgate")
	t.Cleanup(func() { rdb.ZRem(context.Background(), keys.ScheduledTenants(), tenant) })
	h := startIngest(t, testConfig(t, tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 1000, period: 1s}\n    outflow: {rate: 1, capacity: 10, max_backlog: 3}\n")), deps{rdb: rdb})
	ctx := context.Background()
	if err := rdb.Set(ctx, keys.Backlog(tenant), 3, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, body string
		status           int
	}{
		{"scheduled, backlog full", "/v1/jobs", `{"type":"t","payload":{},"delay":"1h"}`, 202},
		{"scheduled, cost above max_backlog", "/v1/jobs", `{"type":"t","payload":{},"delay":"1h","cost":5}`, 202},
		{"immediate, backlog full", "/v1/jobs", `{"type":"t","payload":{}}`, 429},
		{"scheduled a second ahead (due within a minute), backlog full", "/v1/jobs", `{"type":"t","payload":{},"delay":"1s"}`, 429},
		{"batch: one immediate, one scheduled", "/v1/jobs:batch", `{"jobs":[{"type":"t","payload":{}},{"type":"t","payload":{},"delay":"1h"}]}`, 429},
	} {
		a := h.post(t, tenant, c.path, c.body)
		if a.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, a.status, a.body, c.status)
		}
	}
	if n := rdb.HLen(ctx, keys.ScheduledJobs(tenant)).Val(); n != 2 {
		t.Errorf("%d scheduled jobs stored, want the 2 accepted", n)
	}
}

// TestMaxScheduledChargesNothing: a request refused because the tenant
// holds ingest.max_scheduled scheduled jobs is refused before admission,
// so it spends none of the tenant's rate: before, each such 429 took its
// tokens, and a client retrying it ran its tenant out of quota.
func TestMaxScheduledChargesNothing(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "schq")
	t.Cleanup(func() { rdb.ZRem(context.Background(), keys.ScheduledTenants(), tenant) })
	h := startIngest(t, testConfigWith(t, "  max_scheduled: 1\n", tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 3, period: 1h}\n")), deps{rdb: rdb})
	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","payload":{},"delay":"1h"}`); a.status != 202 {
		t.Fatalf("the first scheduled job: %d %s", a.status, a.body)
	}
	for i := range 4 {
		if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","payload":{},"delay":"1h"}`); a.status != 429 || !strings.Contains(string(a.body), "max_scheduled") {
			t.Fatalf("scheduled job %d past max_scheduled: %d %s, want 429 naming max_scheduled", i+2, a.status, a.body)
		}
	}
	for i := range 2 {
		if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","payload":{}}`); a.status != 202 {
			t.Errorf("immediate job %d after the refused ones: %d %s, want 202 (2 of the limit of 3 left)", i+1, a.status, a.body)
		}
	}
}

// TestDueNeverBeforeEnqueued: a job's due_at is never earlier than its
// enqueued_at, even for a delay shorter than the request's own admission
// ("delay":"1ms" answered a due_at before its enqueued_at).
func TestDueNeverBeforeEnqueued(t *testing.T) {
	t.Parallel()
	tenant := testenv.Name(t, "due")
	h, _, _ := schedHarness(t, "redis", tenant, "")
	for range 20 {
		a := h.post(t, tenant, "/v1/jobs", `{"type":"t","payload":{},"delay":"1µs"}`)
		if a.status != 202 {
			t.Fatalf("%d %s", a.status, a.body)
		}
		m := a.json(t)
		due, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(m["due_at"]))
		enq, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(m["enqueued_at"]))
		if err1 != nil || err2 != nil || due.Before(enq) {
			t.Fatalf("due_at %v before enqueued_at %v (%v, %v)", m["due_at"], m["enqueued_at"], err1, err2)
		}
	}
}
