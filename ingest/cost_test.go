package ingest_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// commandLog is a go-redis hook that records the name of every command a
// client sends (alone or in a pipeline), so a test can tell which Redis
// calls a request made.
type commandLog struct {
	mu    sync.Mutex
	names []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.add(cmds...)
		return next(ctx, cmds)
	}
}

func (l *commandLog) add(cmds ...redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cmds {
		l.names = append(l.names, c.Name())
	}
}

// take returns the names recorded since the last take and forgets them.
func (l *commandLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.names
	l.names = nil
	return out
}

// tenantKeys returns every key of tenant (its hash tag) with its DUMP
// serialization and whether it has a TTL: what "Redis holds nothing new"
// compares.
func tenantKeys(t testing.TB, rdb redis.UniversalClient, tenant string) map[string]string {
	t.Helper()
	ctx := context.Background()
	// The tag's braces are not glob metacharacters.
	ks, err := rdb.Keys(ctx, keys.Prefix+"{"+tenant+"}*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	out := make(map[string]string, len(ks))
	for _, k := range ks {
		d, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatalf("PTTL %s: %v", k, err)
		}
		out[k] = fmt.Sprintf("ttl=%v %q", ttl > 0, d)
	}
	return out
}

// limiterOutcomes reads tenant's fail-open counter and its admission
// decisions that were not a plain allow or deny: what a request refused
// before admission must leave alone.
func limiterOutcomes(t testing.TB, h *harness, tenant string) map[string]float64 {
	t.Helper()
	out := map[string]float64{
		"sluice_fail_open_total": testenv.MetricValue(t, h.reg, "sluice_fail_open_total", map[string]string{"tenant": tenant}),
	}
	for _, r := range []string{"allowed", "denied", "backlog", "fail_open", "error", "invalid"} {
		out["decisions "+r] = testenv.MetricValue(t, h.reg, "sluice_admission_decisions_total", map[string]string{"tenant": tenant, "result": r})
	}
	return out
}

// TestCostOverflowReprosRefused runs the three repros of issue 7 item 1
// against tenants that fail open, fail closed and have no admission policy
// at all: each is a 422 naming the job's cost, decided before any Redis
// call (the only command is the answer's read-only dry run of the limit
// state, for tenants with a policy), and afterwards the tenant's keys
// (queue, backlog counter, admission state) are byte for byte what they
// were, and no fail-open or limiter error was counted.
func TestCostOverflowReprosRefused(t *testing.T) {
	t.Parallel()
	check := testenv.Redis(t)
	rdb := testenv.Redis(t)
	var log commandLog
	rdb.AddHook(&log)
	open, closed, none := testenv.Name(t, "open"), testenv.Name(t, "closed"), testenv.Name(t, "none")
	const policy = "    admission: {algorithm: fixed_window, limit: 10, period: 1m}\n    outflow: {max_backlog: 100}\n"
	cfg := testConfig(t,
		tenantYAML(open, policy+"    on_limiter_error: allow\n"),
		tenantYAML(closed, policy+"    on_limiter_error: deny\n"),
		tenantYAML(none, ""))
	h := startIngest(t, cfg, deps{rdb: rdb, clock: newFixedClock()})

	const maxInt = math.MaxInt64 // 2^63 − 1
	repros := []struct {
		name, path, body, field string
	}{
		{"batch [max, max, 3] (wrapped to 1: 202)", "/v1/jobs:batch",
			fmt.Sprintf(`{"jobs":[{"type":"ok","cost":%d},{"type":"ok","cost":%d},{"type":"ok","cost":3}]}`, maxInt, maxInt), "jobs[0].cost"},
		{"batch [max, 2] (wrapped negative: 503)", "/v1/jobs:batch",
			fmt.Sprintf(`{"jobs":[{"type":"ok","cost":%d},{"type":"ok","cost":2}]}`, maxInt), "jobs[0].cost"},
		{"single job of cost max", "/v1/jobs", fmt.Sprintf(`{"type":"ok","cost":%d}`, maxInt), "cost"},
		{"batch [1, max]", "/v1/jobs:batch",
			fmt.Sprintf(`{"jobs":[{"type":"ok","cost":1},{"type":"ok","cost":%d}]}`, maxInt), "jobs[1].cost"},
	}
	for _, tenant := range []string{open, closed, none} {
		// One job first, so there is a queue, a backlog counter and (with a
		// policy) an admission state that a refusal must leave alone.
		if a := h.post(t, tenant, "/v1/jobs", `{"type":"ok"}`); a.status != http.StatusAccepted {
			t.Fatalf("%s: first job: status %d: %s", tenant, a.status, a.body)
		}
		before := tenantKeys(t, check, tenant)
		wantKeys := []string{keys.Queue(tenant), keys.Backlog(tenant)}
		if tenant != none {
			wantKeys = append(wantKeys, keys.Admission(tenant, "fixed_window", "tenant"))
		}
		for _, want := range wantKeys {
			// A fixed window's state key ends with its window.
			if !slices.ContainsFunc(slices.Collect(maps.Keys(before)), func(k string) bool { return strings.HasPrefix(k, want) }) {
				t.Fatalf("%s: after the first job there is no key %s* (keys %v)", tenant, want, before)
			}
		}
		outcomes := limiterOutcomes(t, h, tenant)
		// The bound: the policy's capacity, or ingest.max_job_cost.
		bound := 10
		if tenant == none {
			bound = 1_000_000
		}
		for _, r := range repros {
			t.Run(tenant+"/"+r.name, func(t *testing.T) {
				log.take()
				a := h.post(t, tenant, r.path, r.body)
				sent := log.take()
				p := a.json(t)
				got := map[string]any{"status": a.status, "field": p["field"], "limit": p["limit"]}
				want := map[string]any{"status": http.StatusUnprocessableEntity, "field": r.field, "limit": float64(bound)}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("answer (-want +got):\n%s\nbody %s", diff, a.body)
				}
				if d, _ := p["detail"].(string); !strings.Contains(d, fmt.Sprintf("between 1 and %d", bound)) {
					t.Errorf("detail %q does not state the bound %d", d, bound)
				}
				if a.header.Get("Retry-After") != "" {
					t.Errorf("a 422 carries Retry-After %q", a.header.Get("Retry-After"))
				}
				// Only the read-only dry run of the limit-state headers.
				wantSent := []string{"evalsha"}
				if tenant == none {
					wantSent = nil
				}
				if !slices.Equal(sent, wantSent) {
					t.Errorf("Redis commands sent = %v, want %v", sent, wantSent)
				}
				if diff := cmp.Diff(before, tenantKeys(t, check, tenant)); diff != "" {
					t.Errorf("tenant keys changed (-before +after):\n%s", diff)
				}
				if diff := cmp.Diff(outcomes, limiterOutcomes(t, h, tenant)); diff != "" {
					t.Errorf("limiter metrics moved (-before +after):\n%s", diff)
				}
			})
		}
		if n := len(queued(t, check, tenant)); n != 1 {
			t.Errorf("%s: %d jobs queued, want the first one only", tenant, n)
		}
		if b, err := check.Get(t.Context(), keys.Backlog(tenant)).Int64(); err != nil || b != 1 {
			t.Errorf("%s: backlog = %d (%v), want 1", tenant, b, err)
		}
	}
}

// TestJobCostBounds walks each bound of a job's cost from both sides: the
// most accepted, one more refused with a 422 naming the cost field and the
// bound, for ingest.max_job_cost, an admission policy's capacity (tenant and
// type policy), the outflow capacity (configured and defaulted), and for a
// batch's sums (a policy's capacity, max_backlog). Every case has its own
// tenant; a refused one leaves it without a queued job or backlog.
func TestJobCostBounds(t *testing.T) {
	t.Parallel()
	check := testenv.Redis(t)
	type tcase struct {
		name, tenant, conf string
		path, body         string
		status             int
		field, detail      string
		limit              float64
	}
	single := func(cost int64) string { return fmt.Sprintf(`{"type":"t","cost":%d}`, cost) }
	typed := func(typ string, cost int64) string { return fmt.Sprintf(`{"type":%q,"cost":%d}`, typ, cost) }
	batch := func(costs ...int64) string {
		jobs := make([]string, len(costs))
		for i, c := range costs {
			jobs[i] = single(c)
		}
		return `{"jobs":[` + strings.Join(jobs, ",") + `]}`
	}
	const (
		gcra     = "    admission: {algorithm: gcra, limit: 10, period: 1s, burst: 20}\n"
		withType = "    admission: {algorithm: fixed_window, limit: 30, period: 1m}\n    job_types:\n      enc:\n        admission: {algorithm: fixed_window, limit: 7, period: 1m}\n"
		outflow  = "    outflow: {rate: 2, capacity: 5}\n"
		defCap   = "    outflow: {rate: 3}\n"
		fracCap  = "    outflow: {rate: 2.5}\n"
		slowCap  = "    outflow: {rate: 0.5}\n"
		windowed = "    admission: {algorithm: fixed_window, limit: 10, period: 1m}\n"
		gate     = "    outflow: {max_backlog: 8}\n"
		// The outflow capacity is above the policy's: the policy binds.
		both = "    admission: {algorithm: token_bucket, limit: 4, period: 1s}\n    outflow: {rate: 100}\n"
	)
	cases := []tcase{
		{name: "max_job_cost: at it", conf: "", path: "/v1/jobs", body: single(50), status: 202},
		{name: "max_job_cost: above it", conf: "", path: "/v1/jobs", body: single(51), status: 422, field: "cost", detail: "ingest.max_job_cost", limit: 50},
		{name: "max_job_cost: batch element above it", conf: "", path: "/v1/jobs:batch", body: batch(1, 51), status: 422, field: "jobs[1].cost", detail: "ingest.max_job_cost", limit: 50},
		{name: "gcra burst: at it", conf: gcra, path: "/v1/jobs", body: single(20), status: 202},
		{name: "gcra burst: above it", conf: gcra, path: "/v1/jobs", body: single(21), status: 422, field: "cost", detail: `admission policy "tenant"`, limit: 20},
		{name: "type policy: at it", conf: withType, path: "/v1/jobs", body: typed("enc", 7), status: 202},
		{name: "type policy: above it", conf: withType, path: "/v1/jobs", body: typed("enc", 8), status: 422, field: "cost", detail: `admission policy "type.enc"`, limit: 7},
		{name: "type policy: another type is not bound by it", conf: withType, path: "/v1/jobs", body: typed("other", 30), status: 202},
		{name: "type policy: tenant policy binds another type", conf: withType, path: "/v1/jobs", body: typed("other", 31), status: 422, field: "cost", detail: `admission policy "tenant"`, limit: 30},
		{name: "outflow capacity: at it", conf: outflow, path: "/v1/jobs", body: single(5), status: 202},
		{name: "outflow capacity: above it", conf: outflow, path: "/v1/jobs", body: single(6), status: 422, field: "cost", detail: "outflow capacity", limit: 5},
		{name: "outflow capacity default rate: at it", conf: defCap, path: "/v1/jobs", body: single(3), status: 202},
		{name: "outflow capacity default rate: above it", conf: defCap, path: "/v1/jobs", body: single(4), status: 422, field: "cost", detail: "outflow capacity", limit: 3},
		{name: "outflow capacity 2.5: at 2", conf: fracCap, path: "/v1/jobs", body: single(2), status: 202},
		{name: "outflow capacity 2.5: 3 above it", conf: fracCap, path: "/v1/jobs", body: single(3), status: 422, field: "cost", detail: "outflow capacity", limit: 2},
		{name: "outflow capacity default 1: at it", conf: slowCap, path: "/v1/jobs", body: single(1), status: 202},
		{name: "outflow capacity default 1: above it", conf: slowCap, path: "/v1/jobs:batch", body: batch(1, 2), status: 422, field: "jobs[1].cost", detail: "outflow capacity", limit: 1},
		{name: "policy below outflow capacity binds", conf: both, path: "/v1/jobs", body: single(5), status: 422, field: "cost", detail: `admission policy "tenant"`, limit: 4},
		{name: "batch sum: at the policy's capacity", conf: windowed, path: "/v1/jobs:batch", body: batch(6, 4), status: 202},
		{name: "batch sum: above the policy's capacity", conf: windowed, path: "/v1/jobs:batch", body: batch(6, 4, 1), status: 422, field: "jobs[2].cost", detail: `cost 11 for policy "tenant" above its capacity 10`, limit: 10},
		{name: "batch type subtotal: above its capacity", conf: withType, path: "/v1/jobs:batch", body: `{"jobs":[` + typed("enc", 4) + "," + typed("other", 9) + "," + typed("enc", 4) + `]}`, status: 422, field: "jobs[2].cost", detail: `cost 8 for policy "type.enc" above its capacity 7`, limit: 7},
		{name: "batch sum: at max_backlog", conf: gate, path: "/v1/jobs:batch", body: batch(5, 3), status: 202},
		{name: "batch sum: above max_backlog", conf: gate, path: "/v1/jobs:batch", body: batch(5, 4), status: 422, field: "jobs[1].cost", detail: "max_backlog 8", limit: 8},
		{name: "single job above max_backlog", conf: gate, path: "/v1/jobs", body: single(9), status: 422, field: "cost", detail: "max_backlog 8", limit: 8},
	}
	var confs []string
	for i := range cases {
		cases[i].tenant = testenv.Name(t, fmt.Sprintf("b%d", i))
		confs = append(confs, tenantYAML(cases[i].tenant, cases[i].conf))
	}
	cfg := testConfig(t, confs...)
	cfg.Ingest.MaxJobCost = 50
	h := startIngest(t, cfg, deps{rdb: testenv.Redis(t), clock: newFixedClock()})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := h.post(t, c.tenant, c.path, c.body)
			if a.status != c.status {
				t.Fatalf("status %d, want %d: %s", a.status, c.status, a.body)
			}
			backlog, _ := check.Get(t.Context(), keys.Backlog(c.tenant)).Int64()
			if c.status == http.StatusAccepted {
				if backlog < 1 {
					t.Errorf("accepted, but backlog = %d", backlog)
				}
				return
			}
			p := a.json(t)
			got := map[string]any{"field": p["field"], "limit": p["limit"]}
			if diff := cmp.Diff(map[string]any{"field": c.field, "limit": c.limit}, got); diff != "" {
				t.Errorf("problem (-want +got):\n%s\nbody %s", diff, a.body)
			}
			if d, _ := p["detail"].(string); !strings.Contains(d, c.detail) {
				t.Errorf("detail %q, want it to contain %q", d, c.detail)
			}
			if n, err := check.LLen(t.Context(), keys.Queue(c.tenant)).Result(); err != nil || n != 0 || backlog != 0 {
				t.Errorf("refused, but queue length %d (%v), backlog %d; want 0, 0", n, err, backlog)
			}
			if ks := tenantKeys(t, check, c.tenant); len(ks) != 0 {
				t.Errorf("refused, but the tenant has keys %v", ks)
			}
		})
	}
}

// TestInvalidAdmissionNeverFailsOpen: a request the limiter refuses as
// invalid (here a policy limits.Policy.Validate refuses, forced past config
// validation) is a 500 for a tenant that fails open as for one that fails
// closed: never decided in process, never counted as fail-open, nothing
// queued.
func TestInvalidAdmissionNeverFailsOpen(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	open, closed := testenv.Name(t, "open"), testenv.Name(t, "closed")
	cfg := testConfig(t,
		tenantYAML(open, "    admission: {algorithm: gcra, limit: 10, period: 1s}\n    on_limiter_error: allow\n"),
		tenantYAML(closed, "    admission: {algorithm: gcra, limit: 10, period: 1s}\n    on_limiter_error: deny\n"))
	// Issue 7 item 3's GCRA 2,000,000 per 1s: more than one unit per µs.
	for _, name := range []string{open, closed} {
		tc := cfg.Tenants[name]
		tc.Admission.Limit = 2_000_000
		cfg.Tenants[name] = tc
	}
	h := startIngest(t, cfg, deps{rdb: rdb})
	for _, tenant := range []string{open, closed} {
		a := h.post(t, tenant, "/v1/jobs", `{"type":"t"}`)
		if a.status != http.StatusInternalServerError {
			t.Errorf("%s: status %d, want 500: %s", tenant, a.status, a.body)
		}
		if a.header.Get("Retry-After") != "" {
			t.Errorf("%s: a 500 that retrying cannot cure carries Retry-After %q", tenant, a.header.Get("Retry-After"))
		}
		want := map[string]float64{
			"sluice_fail_open_total": 0, "decisions allowed": 0, "decisions denied": 0, "decisions backlog": 0,
			"decisions fail_open": 0, "decisions error": 0, "decisions invalid": 1,
		}
		if diff := cmp.Diff(want, limiterOutcomes(t, h, tenant)); diff != "" {
			t.Errorf("%s: metrics (-want +got):\n%s", tenant, diff)
		}
		if n := len(queued(t, rdb, tenant)); n != 0 {
			t.Errorf("%s: %d jobs queued, want 0", tenant, n)
		}
	}
}
