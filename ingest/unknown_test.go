package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// TestUnknownOutcomeRetryRedis: the Redis queue backend on a private Redis,
// paused (SIGSTOP) while ingest's enqueue script waits in its socket, answers
// 503 with an unknown outcome; the script runs on resume. A retry with the
// same id answers 202 with the same job id and enqueued_at, and the queue
// holds the job once (enqueue.lua skips the second copy). Another job under
// the id is a 422; a retry while one holds the id is a 409.
func TestUnknownOutcomeRetryRedis(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	qrdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: 250 * time.Millisecond,
		ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { qrdb.Close() })
	producer, err := redisq.NewProducer(redisq.ProducerConfig{Redis: qrdb, EnqueueTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The scripts loaded and a connection open, so the paused server holds
	// the EVALSHA itself (not a handshake) and runs it on resume.
	if err := lua.LoadAll(context.Background(), qrdb); err != nil {
		t.Fatal(err)
	}
	tenant := testenv.Name(t, "unk")
	h := startIngest(t, testConfig(t, tenantYAML(tenant, "")), deps{rdb: testenv.Redis(t), producer: producer})

	// The enqueue's error is an unknown outcome, as the producer says (a
	// producer of its own: a timed-out connection is dropped, and a new one's
	// handshake would wait in the paused server instead of the script).
	probeRDB := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 250 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { probeRDB.Close() })
	probe, err := redisq.NewProducer(redisq.ProducerConfig{Redis: probeRDB, EnqueueTimeout: 500 * time.Millisecond})
	if err != nil || probeRDB.Ping(context.Background()).Err() != nil {
		t.Fatal(err)
	}
	srv.Pause()
	perr := probe.Enqueue(context.Background(), []queue.Envelope{{ID: "probe", Tenant: tenant, Type: "t", Cost: 1}})
	if !errors.Is(perr, queue.ErrUnknownOutcome) || !errors.Is(perr, queue.ErrUnavailable) {
		t.Errorf("Enqueue to a paused Redis = %v, want ErrUnknownOutcome and ErrUnavailable", perr)
	}
	body := `{"type":"t","id":"u1","payload":{"n":1}}`
	a := h.post(t, tenant, "/v1/jobs", body)
	srv.Resume()
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || !strings.Contains(string(a.body), "may be queued") {
		t.Fatalf("paused queue: %d %s (Retry-After %q), want 503 naming an unknown outcome", a.status, a.body, a.header.Get("Retry-After"))
	}
	// The script ran once Redis resumed: the job is queued although the
	// client was told 503.
	var u1 queue.Envelope
	testenv.WaitFor(t, 5*time.Second, "the first copy queued after the resume", func() bool {
		u1 = byID(queued(t, qrdb, tenant), "u1")
		return u1.ID != ""
	})
	first := queued(t, qrdb, tenant)

	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"u1","payload":{"n":2}}`); a.status != http.StatusUnprocessableEntity ||
		a.json(t)["field"] != "id" {
		t.Errorf("another job under the unknown id: %d %s, want 422 naming id", a.status, a.body)
	}
	a = h.post(t, tenant, "/v1/jobs", body)
	if a.status != http.StatusAccepted {
		t.Fatalf("retry with the same id: %d %s, want 202", a.status, a.body)
	}
	m := a.json(t)
	if m["job_id"] != "u1" {
		t.Errorf("retry answered job_id %v, want u1", m["job_id"])
	}
	at, _ := time.Parse(time.RFC3339Nano, m["enqueued_at"].(string))
	if !at.Equal(u1.EnqueuedAt) {
		t.Errorf("retry answered enqueued_at %v, want the first copy's %v", at, u1.EnqueuedAt)
	}
	if got := queued(t, qrdb, tenant); len(got) != 1+countProbe(first) {
		t.Errorf("queue holds %d jobs after the retry, want the job once (%+v)", len(got), got)
	}
	if rec, err := jobstate.Get(context.Background(), qrdb, tenant, "u1"); err != nil || !rec.EnqueuedAt.Equal(u1.EnqueuedAt.Truncate(time.Millisecond)) {
		t.Errorf("job state %+v, %v; want enqueued_at %v", rec, err, u1.EnqueuedAt)
	}
	// Replayed from now on, as any 202.
	if a := h.post(t, tenant, "/v1/jobs", body); a.status != http.StatusAccepted || a.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("third post: %d (replayed %q), want a replayed 202", a.status, a.header.Get("Idempotent-Replayed"))
	}
}

// countProbe is 1 when jobs holds the probe job of the test, else 0.
func countProbe(jobs []queue.Envelope) int {
	for _, j := range jobs {
		if j.ID == "probe" {
			return 1
		}
	}
	return 0
}

// byID returns the job of jobs with id (zero: none).
func byID(jobs []queue.Envelope, id string) queue.Envelope {
	for _, j := range jobs {
		if j.ID == id {
			return j
		}
	}
	return queue.Envelope{}
}

// TestUnknownOutcomeBatchRedis: in a batch whose enqueue outcome is unknown
// each job with an id keeps its id as unknown; the retried batch answers
// 202 with the same job ids and enqueued_at, and each of them is queued
// once. While a retry holds an id, another request with it is a 409.
func TestUnknownOutcomeBatchRedis(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	qrdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 250 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { qrdb.Close() })
	if err := lua.LoadAll(context.Background(), qrdb); err != nil {
		t.Fatal(err)
	}
	producer, err := redisq.NewProducer(redisq.ProducerConfig{Redis: qrdb, EnqueueTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "unkb")
	h := startIngest(t, testConfig(t, tenantYAML(tenant, "")), deps{rdb: rdb, producer: producer})
	body := `{"jobs":[{"type":"t","id":"b1"},{"type":"t","id":"b2","payload":[1]}]}`
	srv.Pause()
	a := h.post(t, tenant, "/v1/jobs:batch", body)
	srv.Resume()
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("paused queue: %d %s, want 503", a.status, a.body)
	}
	testenv.WaitFor(t, 5*time.Second, "the first copies queued after the resume", func() bool {
		return len(queued(t, qrdb, tenant)) == 2
	})
	first := queued(t, qrdb, tenant)

	// A retry in progress holds the id: mark b2's record held.
	ctx := context.Background()
	k := keys.Idempotency(tenant, "b2")
	raw, err := rdb.Get(ctx, k).Result()
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	_ = json.Unmarshal([]byte(raw), &rec)
	rec["held_until"] = time.Now().Add(time.Minute).UnixMilli()
	held, _ := json.Marshal(rec)
	rdb.Set(ctx, k, held, time.Hour)
	if a := h.post(t, tenant, "/v1/jobs:batch", body); a.status != http.StatusConflict || a.header.Get("Retry-After") != "1" {
		t.Errorf("batch while b2 is held: %d %s, want 409 + Retry-After 1", a.status, a.body)
	}
	rdb.Set(ctx, k, raw, time.Hour)

	a = h.post(t, tenant, "/v1/jobs:batch", body)
	if a.status != http.StatusAccepted {
		t.Fatalf("retried batch: %d %s, want 202", a.status, a.body)
	}
	var got struct {
		Jobs []struct {
			JobID      string    `json:"job_id"`
			EnqueuedAt time.Time `json:"enqueued_at"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(a.body, &got); err != nil || len(got.Jobs) != 2 {
		t.Fatalf("batch answer %s: %v", a.body, err)
	}
	for _, j := range got.Jobs {
		if q := byID(first, j.JobID); q.ID == "" || !q.EnqueuedAt.Equal(j.EnqueuedAt) {
			t.Errorf("answered %s at %v, want the first copy's enqueued_at (%+v)", j.JobID, j.EnqueuedAt, q)
		}
	}
	if n := len(queued(t, qrdb, tenant)); n != 2 {
		t.Errorf("queue holds %d jobs after the retried batch, want 2 (each job once)", n)
	}
}
