package ingest_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestHeartbeatPolls, on both backends: for a job submitted with
// "heartbeat", GET by the tenant's key answers its "heartbeat" (interval,
// last_beat, expires_at) and refreshes beat_at, as
// POST /v1/jobs/{id}:heartbeat does. A job
// without one has "heartbeat": null, and POST …:heartbeat on it is a 409;
// a POST to /v1/jobs/{id} without the suffix is a 405.
func TestHeartbeatPolls(t *testing.T) {
	t.Parallel()
	for _, be := range []string{"redis", "kafka"} {
		t.Run(be, func(t *testing.T) {
			t.Parallel()
			tenant := testenv.Name(t, "hb")
			h, rdb, _ := schedHarness(t, be, tenant, "")
			ctx := context.Background()
			if a := h.post(t, tenant, "/v1/jobs:batch", `{"jobs":[{"type":"t","id":"beat","heartbeat":"30s"},{"type":"t","id":"plain"}]}`); a.status != 202 {
				t.Fatalf("submit: %d %s", a.status, a.body)
			}
			beatAt := func() int64 {
				v, _ := rdb.HGet(ctx, keys.JobState(tenant, "beat"), "beat_at").Result()
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
			if beatAt() != 0 {
				t.Fatal("beat_at set before any poll")
			}
			before := time.Now().Add(-time.Second)
			g := h.request(t, "GET", "/v1/jobs/beat", apiKey(tenant), "", "").json(t)
			hb, _ := g["heartbeat"].(map[string]any)
			last, _ := time.Parse(time.RFC3339Nano, str(hb["last_beat"]))
			exp, _ := time.Parse(time.RFC3339Nano, str(hb["expires_at"]))
			if hb["interval"] != "30s" || last.Before(before) || exp.Sub(last) != 30*time.Second {
				t.Errorf("GET heartbeat %v, want interval 30s, last_beat now, expires_at 30s later", g["heartbeat"])
			}
			first := beatAt()
			if first == 0 {
				t.Fatal("GET by the tenant's key did not refresh beat_at")
			}
			time.Sleep(20 * time.Millisecond)
			p := h.request(t, "POST", "/v1/jobs/beat:heartbeat", apiKey(tenant), "", "")
			if p.status != 200 || p.json(t)["job_id"] != "beat" || beatAt() <= first {
				t.Errorf("POST :heartbeat: %d %s, beat_at %d (was %d); want 200 with the job and a later beat", p.status, p.body, beatAt(), first)
			}
			if g := h.request(t, "GET", "/v1/jobs/plain", apiKey(tenant), "", "").json(t); g["heartbeat"] != nil {
				t.Errorf("ordinary job's heartbeat %v, want null", g["heartbeat"])
			}
			if p := h.request(t, "POST", "/v1/jobs/plain:heartbeat", apiKey(tenant), "", ""); p.status != http.StatusConflict {
				t.Errorf("POST :heartbeat of an ordinary job: %d %s, want 409", p.status, p.body)
			}
			if p := h.request(t, "POST", "/v1/jobs/plain", apiKey(tenant), "", ""); p.status != http.StatusMethodNotAllowed || p.header.Get("Allow") != "GET, DELETE" {
				t.Errorf("POST /v1/jobs/plain: %d Allow %q, want 405 GET, DELETE", p.status, p.header.Get("Allow"))
			}
		})
	}
}

func str(v any) string { s, _ := v.(string); return s }

// TestHeartbeatScheduled: a scheduled heartbeat job's heartbeat counts from
// its due time, also after a poll while it waits: last_beat is the due
// time, expires_at an interval after it.
func TestHeartbeatScheduled(t *testing.T) {
	t.Parallel()
	tenant := testenv.Name(t, "hbsched")
	h, _, _ := schedHarness(t, "redis", tenant, "")
	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"s","delay":"1h","heartbeat":"30s"}`); a.status != 202 {
		t.Fatalf("submit: %d %s", a.status, a.body)
	}
	g := h.request(t, "GET", "/v1/jobs/s", apiKey(tenant), "", "").json(t)
	hb, _ := g["heartbeat"].(map[string]any)
	due, _ := time.Parse(time.RFC3339Nano, str(g["due_at"]))
	last, _ := time.Parse(time.RFC3339Nano, str(hb["last_beat"]))
	exp, _ := time.Parse(time.RFC3339Nano, str(hb["expires_at"]))
	if g["state"] != "scheduled" || due.IsZero() || !last.Equal(due) || exp.Sub(due) != 30*time.Second {
		t.Errorf("scheduled heartbeat job: %v, want last_beat = due_at and expires_at 30s after", g)
	}
}
