package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
	"github.com/sluicehq/sluice/queue/redisq"
)

// purgeBackend is one queue backend of the list and purge tests: its
// producer and a drainer started on demand, both on rdb.
type purgeBackend struct {
	name     string
	producer func(t *testing.T, rdb *redis.Client) (queue.Producer, func() queue.Consumer)
}

var purgeBackends = []purgeBackend{
	{"redis", func(t *testing.T, rdb *redis.Client) (queue.Producer, func() queue.Consumer) {
		p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
		if err != nil {
			t.Fatal(err)
		}
		return p, func() queue.Consumer {
			return mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: 3 * time.Second, Poll: 10 * time.Millisecond}))
		}
	}},
	{"kafka", func(t *testing.T, rdb *redis.Client) (queue.Producer, func() queue.Consumer) {
		brokers := testenv.KafkaBrokers(t)
		settings := kafkaq.Settings{Brokers: brokers, Topic: testenv.CreateTopic(t, brokers, 1), Partitions: 1, ReplicationFactor: 1,
			BatchTimeout: 2 * time.Millisecond, ProduceTimeout: 2 * time.Second, ConsumerGroup: testenv.Name(t, "grp")}
		p, err := kafkaq.NewProducer(t.Context(), kafkaq.ProducerConfig{Kafka: settings, Redis: rdb})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p, func() queue.Consumer {
			c, err := kafkaq.NewConsumer(t.Context(), kafkaq.ConsumerConfig{Kafka: settings, Redis: rdb,
				CommitInterval: 100 * time.Millisecond, FetchMaxWait: 100 * time.Millisecond,
				SessionTimeout: 6 * time.Second, HeartbeatInterval: 300 * time.Millisecond, RebalanceTimeout: 10 * time.Second,
				RevokeTimeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			return c
		}
	}},
}

// runPurgeDrainer runs a drainer on consumer c for cfg's tenants until the
// test ends.
func runPurgeDrainer(t *testing.T, rdb redis.UniversalClient, cfg *config.Config, c queue.Consumer) {
	t.Helper()
	d, err := drainer.New(drainer.Config{Consumer: c, Redis: rdb, Tenants: cfg.Tenants, Registerer: prometheus.NewRegistry(),
		Settings: config.Drainer{Lease: 3 * time.Second, MaxAttempts: 3, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, ShutdownTimeout: 2 * time.Second},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// listPage is the JSON of GET /v1/jobs.
type listPage struct {
	Tenant     string    `json:"tenant"`
	State      string    `json:"state"`
	Jobs       []jobView `json:"jobs"`
	NextCursor *string   `json:"next_cursor"`
}

// list GETs /v1/jobs?query with key and decodes a 200.
func (h *harness) list(t testing.TB, key, query string) listPage {
	t.Helper()
	a := h.request(t, http.MethodGet, "/v1/jobs?"+query, key, "", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET /v1/jobs?%s = %d %s, want 200", query, a.status, a.body)
	}
	var p listPage
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// delivered is how many distinct jobs the sink has seen.
func (s *visSink) delivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// TestListAndPurge, on each queue backend: 30 queued jobs list in pages of
// 10 with positions and ETAs, and the second page (after the cursor) is the
// next 10 jobs while a drainer (2 jobs/s) moves the queue; done lists the
// delivered jobs newest first. Then a purge with the drainer running
// cancels every waiting job: none of them is delivered, the backlog is 0,
// each reads cancelled with last_error "purged", the queued list is empty,
// sluice_jobs_purged_total and the audit have the count.
func TestListAndPurge(t *testing.T) {
	for _, b := range purgeBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			rdb := privateRedis(t)
			sink := newVisSink(t)
			tenant := testenv.Name(t, "pg")
			cfg := adminConfig(t, tenantYAML(tenant, fmt.Sprintf("    outflow: {rate: 2, capacity: 1, adaptive: false}\n    target: {url: %q, timeout: 5s}\n", sink.srv.URL)))
			producer, consumer := b.producer(t, rdb)
			h := startAdminIngestOn(t, rdb, cfg, nil, producer)
			key := apiKey(tenant)
			for i := range 30 {
				if a := h.post(t, tenant, "/v1/jobs", fmt.Sprintf(`{"type":"mail","id":"j%02d"}`, i)); a.status != http.StatusAccepted {
					t.Fatalf("submit %d = %d %s", i, a.status, a.body)
				}
			}
			testenv.WaitFor(t, 5*time.Second, "30 jobs listed as queued", func() bool {
				return len(h.list(t, key, "state=queued&limit=500").Jobs) == 30
			})
			p1 := h.list(t, key, "state=queued&limit=10")
			for i, j := range p1.Jobs {
				if j.JobID != fmt.Sprintf("j%02d", i) || j.Position == nil || *j.Position != int64(i) || j.ETASeconds == nil || *j.ETASeconds != float64(i)/2 {
					t.Errorf("page 1 item %d: %+v, want j%02d at position %d, eta %v", i, j, i, i, float64(i)/2)
				}
			}
			if len(p1.Jobs) != 10 || p1.NextCursor == nil || p1.Tenant != tenant || p1.State != "queued" {
				t.Fatalf("page 1: %d jobs, next %v, tenant %s state %s", len(p1.Jobs), p1.NextCursor, p1.Tenant, p1.State)
			}
			runPurgeDrainer(t, rdb, cfg, consumer())
			testenv.WaitFor(t, 10*time.Second, "2 jobs delivered", func() bool { return sink.delivered() >= 2 })
			p2 := h.list(t, key, "state=queued&limit=10&cursor="+*p1.NextCursor)
			for i, j := range p2.Jobs {
				if j.JobID != fmt.Sprintf("j%02d", 10+i) || j.Position == nil || (i > 0 && *j.Position != *p2.Jobs[i-1].Position+1) {
					t.Errorf("page 2 item %d: %+v, want j%02d, positions consecutive", i, j, 10+i)
				}
			}
			if len(p2.Jobs) != 10 || p2.NextCursor == nil {
				t.Errorf("page 2: %d jobs, next %v; want 10 and a next cursor", len(p2.Jobs), p2.NextCursor)
			}
			// A job is done once its finish call ran, after the sink's answer.
			var done listPage
			testenv.WaitFor(t, 3*time.Second, "a done job listed", func() bool {
				done = h.list(t, key, "state=done")
				return len(done.Jobs) > 0
			})
			if len(done.Jobs) == 0 || done.Jobs[0].State != "done" || (len(done.Jobs) > 1 && *done.Jobs[0].UpdatedAt < *done.Jobs[1].UpdatedAt) {
				t.Errorf("done list %+v: want the delivered jobs, newest first", done.Jobs)
			}

			a := h.admin(t, http.MethodPost, "/admin/v1/tenants/"+tenant+"/queue:purge", aliceToken, "")
			var got struct{ Purged int }
			if err := json.Unmarshal(a.body, &got); a.status != http.StatusOK || err != nil {
				t.Fatalf("purge = %d %s", a.status, a.body)
			}
			atPurge := sink.delivered()
			time.Sleep(1500 * time.Millisecond) // 3 more deliveries at 2 jobs/s, were any left
			after := sink.delivered()
			if after > atPurge+1 || got.Purged+after != 30 {
				t.Errorf("purged %d; delivered %d at the purge, %d 1.5 s later; want at most one in flight to finish and purged + delivered = 30", got.Purged, atPurge, after)
			}
			testenv.WaitFor(t, 5*time.Second, "backlog 0", func() bool {
				st := h.request(t, http.MethodGet, "/v1/tenants/"+tenant+"/stats", key, "", "").json(t)
				return st["backlog"] == float64(0)
			})
			if j := h.job(t, key, "j29", ""); j.State != "cancelled" || j.LastError != "purged" || j.Position != nil {
				t.Errorf("GET a purged job: %+v, want cancelled with last_error purged", j)
			}
			if q := h.list(t, key, "state=queued"); len(q.Jobs) != 0 || q.NextCursor != nil {
				t.Errorf("queued after the purge: %+v", q)
			}
			if v, _ := testenv.Metric(t, h.harness.reg, "sluice_jobs_purged_total", map[string]string{"tenant": tenant}); int(v) != got.Purged {
				t.Errorf("sluice_jobs_purged_total = %v, want %d", v, got.Purged)
			}
			audit := h.admin(t, http.MethodGet, "/admin/v1/tenants/"+tenant+"/audit", aliceToken, "")
			var entries struct {
				Entries []struct {
					Who, Action string
					Count       int64
					Changes     []struct{ Path string }
				}
			}
			if err := json.Unmarshal(audit.body, &entries); err != nil || len(entries.Entries) == 0 {
				t.Fatalf("audit %d %s", audit.status, audit.body)
			}
			e := entries.Entries[0]
			if e.Who != "alice" || e.Action != "purge" || len(e.Changes) != 0 || e.Count != int64(got.Purged) {
				t.Errorf("newest audit entry %s, want alice's purge of %d", audit.body, got.Purged)
			}
		})
	}
}

// TestDeletedTenantJobsReachable: DELETE removes a tenant's spec, not its
// jobs, and its queue and dead letters stay reachable: a purge drops the
// queued jobs (200, counted), the dead-letter list answers, and a redrive
// is refused with a 409 saying why. A tenant that never existed stays a
// 404. Before, every one of these answered 404 once the tenant was
// deleted, so its jobs could only be dropped by creating it again, which
// delivered them at once.
func TestDeletedTenantJobsReachable(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	tenant := testenv.Name(t, "del")
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML(tenant, "")), nil)
	for i := range 3 {
		if a := h.post(t, tenant, "/v1/jobs", fmt.Sprintf(`{"type":"mail","id":"d%d"}`, i)); a.status != http.StatusAccepted {
			t.Fatalf("submit %d = %d %s", i, a.status, a.body)
		}
	}
	if a := h.admin(t, http.MethodDelete, "/admin/v1/tenants/"+tenant, aliceToken, ""); a.status != http.StatusNoContent {
		t.Fatalf("delete = %d %s", a.status, a.body)
	}
	base := "/admin/v1/tenants/" + tenant
	a := h.admin(t, http.MethodPost, base+"/queue:purge", aliceToken, "")
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"purged":3`) {
		t.Errorf("purge of the deleted tenant = %d %s, want 200 and 3 purged", a.status, a.body)
	}
	if a := h.admin(t, http.MethodGet, base+"/dlq", aliceToken, ""); a.status != http.StatusOK {
		t.Errorf("dead letters of the deleted tenant = %d %s, want 200", a.status, a.body)
	}
	if a := h.admin(t, http.MethodPost, base+"/dlq:redrive", aliceToken, ""); a.status != http.StatusConflict || !strings.Contains(string(a.body), "deleted") {
		t.Errorf("redrive of the deleted tenant = %d %s, want 409 saying it is deleted", a.status, a.body)
	}
	for _, p := range []string{"/queue:purge", "/dlq:redrive"} {
		if a := h.admin(t, http.MethodPost, "/admin/v1/tenants/never"+p, aliceToken, ""); a.status != http.StatusNotFound {
			t.Errorf("POST %s of a tenant that never existed = %d, want 404", p, a.status)
		}
	}
}
