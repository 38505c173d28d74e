package ingest_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestIdempotentRepeat sends one client id twice: the second answer equals
// the first, is marked replayed, and nothing more is queued. The stored
// answer lives 24 hours.
func TestIdempotentRepeat(t *testing.T) {
	t.Parallel()
	for name, rdb := range map[string]redis.UniversalClient{"standalone": testenv.Redis(t), "cluster": testenv.Cluster(t)} {
		t.Run(name, func(t *testing.T) {
			tenant := testenv.Name(t, "idem")
			cfg := testConfig(t, tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 100, period: 1s}\n"))
			h := startIngest(t, cfg, deps{rdb: rdb})

			first := h.post(t, tenant, "/v1/jobs", `{"type":"email","id":"order-17","payload":{"n":1}}`)
			if first.status != http.StatusAccepted {
				t.Fatalf("first: status %d: %s", first.status, first.body)
			}
			if got := first.json(t)["job_id"]; got != "order-17" {
				t.Errorf("job_id = %v, want the client id order-17", got)
			}
			// Another payload with the same id is still the same job.
			second := h.post(t, tenant, "/v1/jobs", `{"type":"email","id":"order-17","payload":{"n":2}}`)
			if second.status != http.StatusAccepted {
				t.Fatalf("repeat: status %d: %s", second.status, second.body)
			}
			if diff := cmp.Diff(string(first.body), string(second.body)); diff != "" {
				t.Errorf("repeat answer differs (-first +repeat):\n%s", diff)
			}
			if got := second.header.Get("Idempotent-Replayed"); got != "true" {
				t.Errorf("Idempotent-Replayed = %q, want true", got)
			}
			if n := len(queued(t, rdb, tenant)); n != 1 {
				t.Errorf("%d jobs queued, want 1", n)
			}
			ttl, err := rdb.PTTL(t.Context(), keys.Idempotency(tenant, "order-17")).Result()
			if err != nil || ttl < 23*time.Hour || ttl > keys.IdempotencyTTL {
				t.Errorf("stored answer TTL = %v (%v), want about 24h", ttl, err)
			}

			// In a batch, a known id is answered from storage and not queued.
			a := h.post(t, tenant, "/v1/jobs:batch", `{"jobs":[{"type":"email","id":"order-17"},{"type":"email","id":"order-18"}]}`)
			var got struct{ Jobs []json.RawMessage }
			if err := json.Unmarshal(a.body, &got); a.status != 202 || err != nil || len(got.Jobs) != 2 {
				t.Fatalf("batch: status %d: %s", a.status, a.body)
			}
			if diff := cmp.Diff(string(first.body), string(got.Jobs[0])+"\n"); diff != "" {
				t.Errorf("batch answer of the known id (-first +batch):\n%s", diff)
			}
			jobs := queued(t, rdb, tenant)
			if len(jobs) != 2 || jobs[1].ID != "order-18" {
				t.Errorf("queued %d jobs (%v), want order-17 and order-18", len(jobs), jobs)
			}
		})
	}
}

// TestRefusalReleasesTheID checks that an id whose request was refused can
// be used again at once, and is not remembered.
func TestRefusalReleasesTheID(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	clock := newFixedClock()
	tenant := testenv.Name(t, "release")
	cfg := testConfig(t, tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 1, period: 1m}\n"))
	h := startIngest(t, cfg, deps{rdb: rdb, clock: clock})

	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"a"}`); a.status != 202 {
		t.Fatalf("first: %d %s", a.status, a.body)
	}
	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"b"}`); a.status != 429 {
		t.Fatalf("over the limit: %d %s", a.status, a.body)
	}
	if n, _ := rdb.Exists(t.Context(), keys.Idempotency(tenant, "b")).Result(); n != 0 {
		t.Errorf("refused id b is still reserved")
	}
	clock.Advance(time.Minute)
	a := h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"b"}`)
	if a.status != 202 || a.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("retry of b after the refusal: status %d, replayed %q, want a fresh 202", a.status, a.header.Get("Idempotent-Replayed"))
	}
	if n := len(queued(t, rdb, tenant)); n != 2 {
		t.Errorf("%d jobs queued, want 2", n)
	}
}

// TestConcurrentDuplicates sends one id from many clients at once: exactly
// one job is queued; every other answer is the same 202 or a 409 with
// Retry-After: 1 naming the id.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "dup")
	cfg := testConfig(t, tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 1000, period: 1s}\n"))
	h := startIngest(t, cfg, deps{rdb: rdb})

	const n = 24
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"same"}`)
		})
	}
	close(start)
	wg.Wait()

	var accepted, conflicts int
	var body string
	for _, a := range answers {
		switch a.status {
		case http.StatusAccepted:
			accepted++
			if body == "" {
				body = string(a.body)
			} else if string(a.body) != body {
				t.Errorf("two different 202 answers: %s and %s", body, a.body)
			}
		case http.StatusConflict:
			conflicts++
			p := a.json(t)
			if a.header.Get("Retry-After") != "1" || p["field"] != "id" {
				t.Errorf("409: Retry-After %q, body %s; want 1 and field id", a.header.Get("Retry-After"), a.body)
			}
		default:
			t.Errorf("status %d: %s", a.status, a.body)
		}
	}
	t.Logf("%d × 202, %d × 409", accepted, conflicts)
	if accepted == 0 {
		t.Errorf("no request was accepted")
	}
	if jobs := queued(t, rdb, tenant); len(jobs) != 1 {
		t.Errorf("%d jobs queued, want exactly 1", len(jobs))
	}
}
