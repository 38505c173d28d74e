package ingest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue/redisq"
)

// startReplicated starts a private primary and a replica of it (REPLICAOF),
// and waits until the replica is in sync.
func startReplicated(t *testing.T) (primary, replica *testenv.RedisProc, rdb *redis.Client) {
	t.Helper()
	primary = testenv.StartRedis(t)
	replica = testenv.StartReplica(t, primary)
	rdb = redis.NewClient(&redis.Options{Addr: primary.Addr(), ReadTimeout: time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	testenv.WaitFor(t, 10*time.Second, "the replica in sync", func() bool {
		n, err := rdb.Do(context.Background(), "WAIT", 1, 100).Int64()
		return err == nil && n == 1
	})
	if err := lua.LoadAll(context.Background(), rdb); err != nil {
		t.Fatal(err)
	}
	return primary, replica, rdb
}

// TestWaitShortKeepsIDUnknown: with redis.wait_replicas 1 and the only
// replica paused (SIGSTOP), WAIT is short: the job is on the primary, the
// POST is a 503 whose outcome is unknown, and the id stays reserved as
// unknown. A retry while the replica is still paused is a 503 again, and
// the queue never holds two copies; once the replica resumes the retry
// answers 202 with the first job's id and enqueued_at, and the queue holds
// the job once.
func TestWaitShortKeepsIDUnknown(t *testing.T) {
	t.Parallel()
	_, replica, qrdb := startReplicated(t)
	producer, err := redisq.NewProducer(redisq.ProducerConfig{Redis: qrdb, EnqueueTimeout: 500 * time.Millisecond,
		Wait: lua.Wait{Replicas: 1, Timeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	tenant := testenv.Name(t, "waitu")
	h := startIngest(t, testConfig(t, tenantYAML(tenant, "")), deps{rdb: testenv.Redis(t), producer: producer})
	body := `{"type":"t","id":"w1","payload":{"n":1}}`

	replica.Pause()
	a := h.post(t, tenant, "/v1/jobs", body)
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || !strings.Contains(string(a.body), "may be queued") {
		replica.Resume()
		t.Fatalf("short WAIT: %d %s (Retry-After %q), want 503 naming an unknown outcome", a.status, a.body, a.header.Get("Retry-After"))
	}
	first := queued(t, qrdb, tenant)
	if len(first) != 1 || first[0].ID != "w1" {
		replica.Resume()
		t.Fatalf("after the short WAIT the primary holds %+v, want w1 once", first)
	}
	a = h.post(t, tenant, "/v1/jobs", body)
	if a.status != http.StatusServiceUnavailable && a.status != http.StatusAccepted {
		t.Errorf("retry while the replica is paused: %d %s, want 503 or 202", a.status, a.body)
	}
	if n := len(queued(t, qrdb, tenant)); n != 1 {
		t.Errorf("queue holds %d jobs after a retry during the pause, want 1", n)
	}
	replica.Resume()
	testenv.WaitFor(t, 10*time.Second, "the replica in sync again", func() bool {
		n, err := qrdb.Do(context.Background(), "WAIT", 1, 100).Int64()
		return err == nil && n == 1
	})

	a = h.post(t, tenant, "/v1/jobs", body)
	if a.status != http.StatusAccepted {
		t.Fatalf("retry after the resume: %d %s, want 202", a.status, a.body)
	}
	m := a.json(t)
	at, _ := time.Parse(time.RFC3339Nano, m["enqueued_at"].(string))
	if m["job_id"] != "w1" || !at.Equal(first[0].EnqueuedAt) {
		t.Errorf("retry answered %v at %v, want w1 at the first copy's %v", m["job_id"], at, first[0].EnqueuedAt)
	}
	if got := queued(t, qrdb, tenant); len(got) != 1 {
		t.Errorf("queue holds %d jobs after the 202, want the job once (%+v)", len(got), got)
	}
}

// TestWaitShortScheduled: a scheduled job stored while the only replica is
// paused (redis.wait_replicas 1) is a 503 whose outcome is unknown; its id
// stays reserved, so the retry stores the same job (same enqueued_at), and
// the tenant's scheduled index holds it once, also after a retry once the
// scheduler moved it (schedule_add skips a job already past "scheduled"
// with the same enqueued_at).
func TestWaitShortScheduled(t *testing.T) {
	t.Parallel()
	_, replica, rdb := startReplicated(t)
	tenant := testenv.Name(t, "waits")
	cfg := testConfig(t, tenantYAML(tenant, ""))
	cfg.Redis.WaitReplicas, cfg.Redis.WaitTimeout = 1, 100*time.Millisecond
	h := startIngest(t, cfg, deps{rdb: rdb})
	body := `{"type":"t","id":"s1","delay":"1h"}`
	ctx := context.Background()
	scheduled := func() int64 { return rdb.ZCard(ctx, keys.JobIndex(tenant, "scheduled")).Val() }

	replica.Pause()
	a := h.post(t, tenant, "/v1/jobs", body)
	if a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), "may be") {
		replica.Resume()
		t.Fatalf("short WAIT of a scheduled job: %d %s, want 503 naming an unknown outcome", a.status, a.body)
	}
	at1 := rdb.HGet(ctx, keys.JobState(tenant, "s1"), "enqueued_at").Val()
	if n := scheduled(); n != 1 || at1 == "" {
		t.Fatalf("scheduled index holds %d (enqueued_at %q), want s1 once", n, at1)
	}
	// The scheduler moved it meanwhile: the retry must not schedule it again.
	rdb.HSet(ctx, keys.JobState(tenant, "s1"), "state", "queued")
	rdb.ZRem(ctx, keys.JobIndex(tenant, "scheduled"), "s1")
	replica.Resume()
	testenv.WaitFor(t, 10*time.Second, "the replica in sync again", func() bool {
		n, err := rdb.Do(ctx, "WAIT", 1, 100).Int64()
		return err == nil && n == 1
	})
	a = h.post(t, tenant, "/v1/jobs", body)
	if a.status != http.StatusAccepted || a.json(t)["job_id"] != "s1" {
		t.Fatalf("retry after the resume: %d %s, want 202 for s1", a.status, a.body)
	}
	if n := scheduled(); n != 0 {
		t.Errorf("scheduled index holds %d after the retry of a moved job, want 0", n)
	}
	if at := rdb.HGet(ctx, keys.JobState(tenant, "s1"), "enqueued_at").Val(); at != at1 {
		t.Errorf("enqueued_at %s after the retry, want the first %s", at, at1)
	}
}

// TestWaitKeptByReload: redis.wait_replicas is read at start, as the Redis
// producer's wait: a reload that sets it to 0 leaves a scheduled store
// waiting (a 503 on a primary without replicas).
func TestWaitKeptByReload(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	tenant := testenv.Name(t, "waitr")
	cfg := testConfig(t, tenantYAML(tenant, ""))
	cfg.Redis.WaitReplicas, cfg.Redis.WaitTimeout = 1, 50*time.Millisecond
	h := startIngest(t, cfg, deps{rdb: rdb})
	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","delay":"1h"}`); a.status != http.StatusServiceUnavailable {
		t.Fatalf("scheduled job with no replica: %d %s, want 503", a.status, a.body)
	}
	reloaded := testConfig(t, tenantYAML(tenant, ""))
	h.srv.SetConfig(reloaded)
	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","delay":"1h"}`); a.status != http.StatusServiceUnavailable {
		t.Errorf("after a reload with wait_replicas 0: %d %s, want 503 (the wait is fixed at start)", a.status, a.body)
	}
}
