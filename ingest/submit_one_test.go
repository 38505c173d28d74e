package ingest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// countedCmds are every command the ingest scripts run, as INFO
// commandstats names them: their sum over a window is the commands per 202.
var countedCmds = []string{"evalsha", "eval", "time", "get", "set", "rpush", "llen", "incrby", "decrby",
	"pexpire", "hget", "hmget", "hset", "del", "type", "zadd", "zrem", "zcard", "zscore",
	"zrangebyscore", "zremrangebyscore", "hincrby", "hdel", "wait"}

// wrappedProducer hides the *redisq.Producer under it, so the server takes
// the two-step path (admit.lua, then enqueue.lua): the "before" of the
// counts.
type wrappedProducer struct{ queue.Producer }

// perRequest serves n sequential one-job 202s of a GCRA tenant on a private
// Redis and returns the script calls and commands per 202; twoStep selects
// the path of admission then enqueue.
func perRequest(t *testing.T, twoStep bool, body string) (calls, cmds float64) {
	t.Helper()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	if err := lua.LoadAll(context.Background(), rdb); err != nil {
		t.Fatal(err)
	}
	tenant := testenv.Name(t, "one")
	cfg := testConfig(t, tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 1000, period: 1s, burst: 1000}\n"))
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	var prod queue.Producer = p
	if twoStep {
		prod = wrappedProducer{p}
	}
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb, Unbatched: true})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := ingest.New(ingest.Config{Settings: cfg, Redis: rdb, Producer: prod, Admitter: adm, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, srv)
	// {i} in body is the request's number (a fresh client id each time).
	bodyOf := func(i int) string { return strings.ReplaceAll(body, "{i}", strconv.Itoa(i)) }
	h.post(t, tenant, "/v1/jobs", bodyOf(-1)) // the first write of each key
	const n = 10
	c0, m0 := testenv.CommandCalls(t, rdb, "evalsha", "eval"), testenv.CommandCalls(t, rdb, countedCmds...)
	for i := range n {
		if a := h.post(t, tenant, "/v1/jobs", bodyOf(i)); a.status != http.StatusAccepted {
			t.Fatalf("job %d: %d %s", i, a.status, a.body)
		}
	}
	c1, m1 := testenv.CommandCalls(t, rdb, "evalsha", "eval"), testenv.CommandCalls(t, rdb, countedCmds...)
	if got := len(queued(t, rdb, tenant)); got != n+1 {
		t.Fatalf("%d jobs queued, want %d", got, n+1)
	}
	return float64(c1-c0) / n, float64(m1-m0) / n
}

// TestSubmitOneScriptCall: on the Redis backend a 202 costs one script
// call (submit.lua: admission and enqueue), where the two-step path costs
// two (admit.lua, enqueue.lua); with a client id, one more round trip each
// for the reservation and the stored answer, still one script call.
func TestSubmitOneScriptCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		twoStep bool
		body    string
		calls   float64
	}{
		{"submit", false, `{"type":"t"}`, 1},
		{"two-step", true, `{"type":"t"}`, 2},
		{"submit with id", false, `{"type":"t","id":"j{i}"}`, 1},
		{"two-step with id", true, `{"type":"t","id":"j{i}"}`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls, cmds := perRequest(t, tc.twoStep, tc.body)
			if calls != tc.calls {
				t.Errorf("%v script calls per 202, want %v", calls, tc.calls)
			}
			t.Logf("%s: %.1f script calls, %.1f commands per 202 (INFO commandstats, SET NX/SET of an id included)", tc.name, calls, cmds)
		})
	}
}

// dumpTenant returns every key of tenant with its DUMP (its value, not its
// TTL), for a before/after comparison.
func dumpTenant(t *testing.T, rdb redis.UniversalClient, tenant string) map[string]string {
	t.Helper()
	ctx := context.Background()
	ks, err := rdb.Keys(ctx, "sluice:{"+tenant+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(ks)
	out := make(map[string]string, len(ks))
	for _, k := range ks {
		v, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		out[k] = v
	}
	return out
}

// TestSubmitRefusalWritesNothing: a request refused by a policy or by the
// backlog gate leaves every key of its tenant as it was: no list entry, no
// job state, no backlog, no policy charge (the backlog refusal's policy
// admits, but is not charged).
func TestSubmitRefusalWritesNothing(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	byPolicy, byBacklog := testenv.Name(t, "refp"), testenv.Name(t, "refb")
	cfg := testConfig(t,
		tenantYAML(byPolicy, "    admission: {algorithm: gcra, limit: 1, period: 1h, burst: 1}\n"),
		tenantYAML(byBacklog, "    admission: {algorithm: fixed_window, limit: 100, period: 1h}\n    outflow: {max_backlog: 2}\n"))
	h := startIngest(t, cfg, deps{rdb: rdb, clock: newFixedClock()})
	for _, tc := range []struct{ tenant, first, refused string }{
		{byPolicy, `{"type":"t"}`, `{"type":"t","id":"x1"}`},
		{byBacklog, `{"type":"t","cost":2}`, `{"type":"t","id":"x1"}`},
	} {
		if a := h.post(t, tc.tenant, "/v1/jobs", tc.first); a.status != http.StatusAccepted {
			t.Fatalf("%s first job: %d %s", tc.tenant, a.status, a.body)
		}
		before := dumpTenant(t, rdb, tc.tenant)
		if a := h.post(t, tc.tenant, "/v1/jobs", tc.refused); a.status != http.StatusTooManyRequests {
			t.Fatalf("%s second job: %d %s, want 429", tc.tenant, a.status, a.body)
		}
		after := dumpTenant(t, rdb, tc.tenant)
		if len(after) != len(before) {
			t.Errorf("%s: refusal changed the keys: %d before, %d after", tc.tenant, len(before), len(after))
		}
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s: refusal changed %s", tc.tenant, k)
			}
		}
		if n := len(queued(t, rdb, tc.tenant)); n != 1 {
			t.Errorf("%s: %d jobs queued, want 1", tc.tenant, n)
		}
	}
}

// TestSubmitBacklogGateExact: N concurrent one-unit requests against
// max_backlog M admit exactly M (the gate reads the backlog in the script
// that raises it), on a standalone Redis (one script call per batch) and a
// cluster (one per tenant). The Kafka backend's gate reads a backlog raised
// after the produce, so it stays approximate under concurrency
// (docs/perf.md 3.2).
func TestSubmitBacklogGateExact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rdb  func(testing.TB) redis.UniversalClient
	}{
		{"standalone", func(t testing.TB) redis.UniversalClient { return testenv.Redis(t) }},
		{"cluster", func(t testing.TB) redis.UniversalClient { return testenv.Cluster(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := tc.rdb(t)
			tenant := testenv.Name(t, "gate")
			const n, m = 24, 7
			cfg := testConfig(t, tenantYAML(tenant, "    outflow: {max_backlog: 7}\n"))
			h := startIngest(t, cfg, deps{rdb: rdb})
			var wg sync.WaitGroup
			status := make([]int, n)
			for i := range n {
				wg.Go(func() { status[i] = h.post(t, tenant, "/v1/jobs", `{"type":"t"}`).status })
			}
			wg.Wait()
			admitted := 0
			for _, s := range status {
				switch s {
				case http.StatusAccepted:
					admitted++
				case http.StatusTooManyRequests:
				default:
					t.Errorf("status %d, want 202 or 429", s)
				}
			}
			if admitted != m {
				t.Errorf("%d of %d admitted, want exactly max_backlog %d", admitted, n, m)
			}
			if q := len(queued(t, rdb, tenant)); q != m {
				t.Errorf("%d jobs queued, want %d", q, m)
			}
			if b, _ := rdb.Get(context.Background(), keys.Backlog(tenant)).Int64(); b != m {
				t.Errorf("backlog %d, want %d", b, m)
			}
		})
	}
}

// startHarness serves srv behind an httptest server.
func startHarness(t testing.TB, srv *ingest.Server) *harness {
	t.Helper()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &harness{srv: srv, url: hs.URL}
}

// TestBacklogGate fills a tenant's backlog to max_backlog and checks the
// 429's Retry-After = ⌈backlog ÷ outflow rate⌉, and the fallback for a tenant
// without an outflow rate (ingest.retry_after).
func TestBacklogGate(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	slow, unlimited := testenv.Name(t, "slow"), testenv.Name(t, "unl")
	cfg := testConfig(t,
		tenantYAML(slow, "    outflow: {rate: 2, max_backlog: 5}\n"),
		tenantYAML(unlimited, "    outflow: {max_backlog: 2}\n"))
	h := startIngest(t, cfg, deps{rdb: rdb})

	if a := h.post(t, slow, "/v1/jobs:batch", `{"jobs":[{"type":"t","cost":2},{"type":"t","cost":2}]}`); a.status != 202 {
		t.Fatalf("backlog 0 + 4 <= 5: status %d: %s", a.status, a.body)
	}
	if a := h.post(t, slow, "/v1/jobs", `{"type":"t","cost":2}`); a.status != 429 {
		t.Fatalf("backlog 4 + 2 > 5: status %d, want 429: %s", a.status, a.body)
	}
	if a := h.post(t, slow, "/v1/jobs", `{"type":"t"}`); a.status != 202 {
		t.Fatalf("backlog 4 + 1 <= 5: status %d: %s", a.status, a.body)
	}
	a := h.post(t, slow, "/v1/jobs", `{"type":"t"}`)
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("backlog 5 full: status %d, want 429: %s", a.status, a.body)
	}
	// 5 units at 2 per second leave in 2.5 s, rounded up.
	if got := a.header.Get("Retry-After"); got != "3" {
		t.Errorf("Retry-After = %q, want 3 = ⌈5 ÷ 2⌉", got)
	}
	p := a.json(t)
	if !cmp.Equal(p["violated-policies"], []any{"backlog"}) || p["backlog"] != float64(5) || p["retry_after"] != float64(3) {
		t.Errorf("backlog 429 body %s: want violated-policies [backlog], backlog 5, retry_after 3", a.body)
	}
	// The limit-state headers describe the gate that refused: no quota left
	// until the queued units leave.
	for name, want := range map[string]string{
		"RateLimit-Policy": `"backlog";q=5`, "RateLimit": `"backlog";r=0;t=3`,
		"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "3",
	} {
		if got := a.header.Get(name); got != want {
			t.Errorf("backlog 429 %s = %q, want %q", name, got, want)
		}
	}

	for range 2 {
		if a := h.post(t, unlimited, "/v1/jobs", `{"type":"t"}`); a.status != 202 {
			t.Fatalf("unlimited tenant under max_backlog: status %d: %s", a.status, a.body)
		}
	}
	a = h.post(t, unlimited, "/v1/jobs", `{"type":"t"}`)
	if a.status != 429 || a.header.Get("Retry-After") != "2" {
		t.Errorf("tenant without outflow rate: status %d, Retry-After %q, want 429 and 2 (ingest.retry_after)", a.status, a.header.Get("Retry-After"))
	}
	if n := len(queued(t, rdb, slow)); n != 3 {
		t.Errorf("%d jobs queued for %s, want 3", n, slow)
	}

	// With an admission policy too, its state (untouched by the refusal)
	// comes first and X-RateLimit-* describe the gate.
	policed := testenv.Name(t, "pol")
	h.srv.SetConfig(testConfig(t, tenantYAML(policed,
		"    admission: {algorithm: fixed_window, limit: 100, period: 1h}\n    outflow: {max_backlog: 1}\n")))
	if a := h.post(t, policed, "/v1/jobs", `{"type":"t"}`); a.status != 202 {
		t.Fatalf("policed tenant under max_backlog: status %d: %s", a.status, a.body)
	}
	a = h.post(t, policed, "/v1/jobs", `{"type":"t"}`)
	for name, want := range map[string]string{
		"RateLimit-Policy": `"tenant";q=100;w=3600, "backlog";q=1`, "X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0",
	} {
		if got := a.header.Get(name); a.status != 429 || got != want {
			t.Errorf("policed tenant's backlog 429 (status %d) %s = %q, want %q", a.status, name, got, want)
		}
	}
	if got := a.header.Get("RateLimit"); !strings.HasPrefix(got, `"tenant";r=99;`) || !strings.HasSuffix(got, `, "backlog";r=0;t=2`) {
		t.Errorf("policed tenant's backlog 429 RateLimit = %q, want the tenant's r=99, then the backlog's r=0;t=2", got)
	}
}
