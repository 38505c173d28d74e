package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/ingest/ui"
	"github.com/sluicehq/sluice/internal/depth"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue/redisq"
	"github.com/sluicehq/sluice/tenants"
)

// TestConsoleFiles: /ui/ serves the embedded page and its files without
// auth, each with the strict CSP and nosniff, the HTML no-store; other
// names are 404, other methods 405, /ui redirects to /ui/.
func TestConsoleFiles(t *testing.T) {
	t.Parallel()
	h := startIngest(t, testConfig(t, tenantYAML(testenv.Name(t, "ui"), "")), deps{rdb: testenv.Redis(t)})
	for _, tt := range []struct {
		path, ctype, cache string
	}{
		{"/ui/", "text/html; charset=utf-8", "no-store"},
		{"/ui/index.html", "text/html; charset=utf-8", "no-store"},
		{"/ui/app.js", "text/javascript; charset=utf-8", "no-cache"},
		{"/ui/tenant.js", "text/javascript; charset=utf-8", "no-cache"},
		{"/ui/chart.js", "text/javascript; charset=utf-8", "no-cache"},
		{"/ui/app.css", "text/css; charset=utf-8", "no-cache"},
		{"/ui/favicon.svg", "image/svg+xml", "no-cache"},
	} {
		ans := h.request(t, "GET", tt.path, "", "", "")
		if ans.status != 200 || ans.header.Get("Content-Type") != tt.ctype || ans.header.Get("Cache-Control") != tt.cache {
			t.Errorf("GET %s = %d %q %q, want 200 %q %q", tt.path, ans.status, ans.header.Get("Content-Type"), ans.header.Get("Cache-Control"), tt.ctype, tt.cache)
		}
		if csp := ans.header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self';") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q, want default-src 'self' and nothing unsafe", tt.path, csp)
		}
		if ans.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", tt.path, ans.header.Get("X-Content-Type-Options"))
		}
	}
	for _, path := range []string{"/ui/nope.js", "/ui/static/app.js", "/ui/x/index.html"} {
		if ans := h.request(t, "GET", path, "", "", ""); ans.status != 404 {
			t.Errorf("GET %s = %d, want 404", path, ans.status)
		}
	}
	if ans := h.request(t, "POST", "/ui/", "", "", ""); ans.status != 405 || ans.header.Get("Allow") != "GET" {
		t.Errorf("POST /ui/ = %d Allow %q, want 405 Allow GET", ans.status, ans.header.Get("Allow"))
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(h.url + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 3 || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui = %d Location %q, want a redirect to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestConsoleSelfContained: the console's files load nothing from another
// origin, have no inline script or style (the CSP would block them), and
// never put the token in a URL: it is read from sessionStorage and sent in
// the Authorization header only, and the login form names no field.
func TestConsoleSelfContained(t *testing.T) {
	t.Parallel()
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import|fetch\(\s*["'\x60]https?:`)
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|\sstyle\s*=|\son[a-z]+\s*=|javascript:`)
	err := fs.WalkDir(ui.Files(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(ui.Files(), name)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers to another origin: %q", name, m)
		}
		if strings.HasSuffix(name, ".html") {
			if m := inline.Find(b); m != nil {
				t.Errorf("%s has inline script or style: %q", name, m)
			}
		}
		if strings.HasSuffix(name, ".js") && regexp.MustCompile(`token[^\n]*[?&][a-z_]*=`).Match(b) {
			t.Errorf("%s may put the token in a URL", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A form submitted without the script (blocked, failed) sends its named
	// fields in the URL: the token field has no name.
	page, _ := fs.ReadFile(ui.Files(), "index.html")
	if m := regexp.MustCompile(`<input id="token"[^>]*>`).Find(page); m == nil || bytes.Contains(m, []byte("name=")) {
		t.Errorf("the token field %q must exist and have no name attribute", m)
	}
	app, _ := fs.ReadFile(ui.Files(), "app.js")
	if !bytes.Contains(app, []byte(`headers.Authorization = "Bearer " + token`)) || !bytes.Contains(app, []byte("sessionStorage")) {
		t.Error("app.js does not send the token from sessionStorage as Authorization: Bearer")
	}
}

// TestOverviewMatchesStats: GET /admin/v1/overview holds, for every
// configured tenant in id order, the object GET /v1/tenants/{id}/stats
// answers; on both queue backends (the DLQ count is read per backend).
func TestOverviewMatchesStats(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"redis", "kafka"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			rdb := privateRedis(t)
			ctx := context.Background()
			a, b := testenv.Name(t, "ov-a"), testenv.Name(t, "ov-b")
			cfg := adminConfig(t, tenantYAML(b, "    outflow: {rate: 4, capacity: 8}\n"), tenantYAML(a, ""))
			cfg.Queue.Backend = backend
			h := startAdminIngest(t, rdb, cfg, nil)
			rdb.Set(ctx, keys.Backlog(a), 12, time.Minute)
			rdb.Set(ctx, keys.Backlog(b), 30, time.Minute)
			rdb.ZAdd(ctx, keys.JobIndex(b, "dead"), redis.Z{Score: 1, Member: "d1"}, redis.Z{Score: 2, Member: "d2"})

			ans := h.admin(t, "GET", "/admin/v1/overview", aliceToken, "")
			if ans.status != 200 || ans.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("overview = %d %s (Cache-Control %q), want 200 no-store", ans.status, ans.body, ans.header.Get("Cache-Control"))
			}
			var got struct{ Tenants []map[string]any }
			if err := json.Unmarshal(ans.body, &got); err != nil {
				t.Fatal(err)
			}
			want := []map[string]any{}
			for _, tn := range []string{a, b} {
				want = append(want, h.admin(t, "GET", "/v1/tenants/"+tn+"/stats", aliceToken, "").json(t))
			}
			// water_level and effective_rate are computed at the instant of each
			// read; with no drainer they stay 0 and rate, as every other figure.
			if diff := cmp.Diff(want, got.Tenants); diff != "" {
				t.Errorf("overview tenants (-stats +overview):\n%s", diff)
			}
			// The DLQ count is the dead index's size on both backends.
			if len(got.Tenants) == 2 && (got.Tenants[1]["dlq"] != 2.0 || got.Tenants[1]["backlog"] != 30.0) {
				t.Errorf("overview of %s: dlq %v backlog %v, want 2 30", b, got.Tenants[1]["dlq"], got.Tenants[1]["backlog"])
			}
		})
	}
}

// TestConsoleAdminAccess: the console's admin routes take an admin token
// (401 without, or with a tenant key), answer 405 to other methods, and the
// history of an unconfigured tenant is a 404.
func TestConsoleAdminAccess(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	tn := testenv.Name(t, "acc")
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML(tn, "")), nil)
	for _, tt := range []struct {
		method, path, token string
		status              int
	}{
		{"GET", "/admin/v1/overview", aliceToken, 200},
		{"GET", "/admin/v1/overview", "", 401},
		{"GET", "/admin/v1/overview", apiKey(tn), 401},
		{"POST", "/admin/v1/overview", aliceToken, 405},
		{"GET", "/admin/v1/tenants/" + tn + "/history", aliceToken, 200},
		{"GET", "/admin/v1/tenants/" + tn + "/history", "", 401},
		{"GET", "/admin/v1/tenants/" + tn + "/history", apiKey(tn), 401},
		{"DELETE", "/admin/v1/tenants/" + tn + "/history", aliceToken, 405},
		{"GET", "/admin/v1/tenants/nobody/history", aliceToken, 404},
	} {
		if ans := h.admin(t, tt.method, tt.path, tt.token, ""); ans.status != tt.status {
			t.Errorf("%s %s (token %q) = %d %s, want %d", tt.method, tt.path, tt.token, ans.status, ans.body, tt.status)
		}
	}
	// With no admin tokens the routes are absent, as the rest of the admin API.
	off := startIngest(t, testConfig(t, tenantYAML(tn, "")), deps{rdb: rdb})
	if ans := off.request(t, "GET", "/admin/v1/overview", aliceToken, "", ""); ans.status != 404 {
		t.Errorf("overview with the admin API off = %d, want 404", ans.status)
	}
}

// TestHistoryRoute: the history route answers the samples the depth
// sampler (of ingest or a drainer) wrote, with the 5-s step, and an empty
// list for a tenant not sampled yet.
func TestHistoryRoute(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	ctx := context.Background()
	a, b := testenv.Name(t, "hist"), testenv.Name(t, "hist-none")
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML(a, ""), tenantYAML(b, "")), nil)
	rdb.Set(ctx, keys.Backlog(a), 17, time.Minute)
	s := depth.Sampler{Redis: rdb, Gauge: depth.NewGauge("test")}
	if n := s.Sample(ctx, []string{a}); n != 0 {
		t.Fatalf("Sample: %d failed", n)
	}
	var got struct {
		Tenant      string
		StepSeconds int64 `json:"step_seconds"`
		Points      []depth.Point
	}
	ans := h.admin(t, "GET", "/admin/v1/tenants/"+a+"/history", aliceToken, "")
	if err := json.Unmarshal(ans.body, &got); err != nil || ans.status != 200 {
		t.Fatalf("history = %d %s (%v)", ans.status, ans.body, err)
	}
	if got.Tenant != a || got.StepSeconds != 5 || len(got.Points) != 1 || got.Points[0].Backlog != 17 || got.Points[0].T%5 != 0 {
		t.Errorf("history = %+v, want tenant %s, step 5, one point of backlog 17 on a 5-s slot", got, a)
	}
	ans = h.admin(t, "GET", "/admin/v1/tenants/"+b+"/history", aliceToken, "")
	if ans.status != 200 || !bytes.Contains(ans.body, []byte(`"points":[]`)) {
		t.Errorf("history of a tenant not sampled = %d %s, want 200 with points []", ans.status, ans.body)
	}
}

// TestConsoleTokenNotLogged: a refused and an accepted admin token are not
// in ingest's log, whatever its level.
func TestConsoleTokenNotLogged(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tn := testenv.Name(t, "log")
	cfg := adminConfig(t, tenantYAML(tn, ""))
	reg, err := tenants.NewRegistry(tenants.RegistryConfig{Redis: rdb, Base: cfg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ingest.New(ingest.Config{Settings: cfg, Redis: rdb, Producer: p, Admitter: adm, Tenants: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	h := &harness{srv: srv, url: hs.URL}
	for _, tok := range []string{aliceToken, "wrong-admin-token-xyz"} {
		h.request(t, "GET", "/admin/v1/overview", tok, "", "")
		h.request(t, "GET", "/admin/v1/tenants/"+tn+"/history", tok, "", "")
		h.request(t, "GET", "/ui/", tok, "", "")
	}
	if s := buf.String(); strings.Contains(s, aliceToken) || strings.Contains(s, "wrong-admin-token-xyz") {
		t.Errorf("ingest logged an admin token:\n%s", s)
	}
}
