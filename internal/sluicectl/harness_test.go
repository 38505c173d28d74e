package sluicectl

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue/redisq"
	"github.com/sluicehq/sluice/tenants"
)

// stack is a real ingest handler on the shared Redis behind an httptest
// server, with the Redis queue backend.
type stack struct {
	url string
	rdb *redis.Client
	srv *ingest.Server
}

// keyOf is the test API key of tenant.
func keyOf(tenant string) string { return "key-" + tenant }

// tenantYAML is one tenant's configuration: its key plus body, a YAML
// fragment indented by four spaces.
func tenantYAML(name, body string) string {
	return fmt.Sprintf("  %s:\n    api_keys: [%q]\n%s", name, config.HashKey(keyOf(name)), body)
}

// adminToken is the admin token of startStack's configurations (name "ops").
const adminToken = "ctl-admin-token"

// startStack parses a configuration of the given tenants (tenantYAML
// fragments, plus extra top-level YAML before them) and serves a real
// ingest handler on it, on the shared Redis.
func startStack(t *testing.T, extra string, tenantFragments ...string) *stack {
	t.Helper()
	return serve(t, testenv.Redis(t), extra, tenantFragments...)
}

// startAdminStack is startStack with the admin API (a tenants.Registry and
// the admin token adminToken), on a private Redis: a registry reads every
// runtime tenant of its server.
func startAdminStack(t *testing.T, tenantFragments ...string) *stack {
	t.Helper()
	p := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return serve(t, rdb, "ingest:\n  admin_tokens: {ops: "+config.HashKey(adminToken)+"}\n", tenantFragments...)
}

func serve(t *testing.T, rdb *redis.Client, extra string, tenantFragments ...string) *stack {
	t.Helper()
	y := extra + "tenants:\n" + strings.Join(tenantFragments, "")
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, y)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	var reg *tenants.Registry
	if len(cfg.Ingest.AdminTokens) > 0 {
		if reg, err = tenants.NewRegistry(tenants.RegistryConfig{Redis: rdb, Base: cfg}); err != nil {
			t.Fatal(err)
		}
		if err := reg.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		cfg = reg.Config()
	}
	srv, err := ingest.New(ingest.Config{Settings: cfg, Redis: rdb, Producer: p, Admitter: adm, Tenants: reg})
	if err != nil {
		t.Fatalf("ingest.New: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if reg != nil {
			_ = reg.Run(ctx, srv.SetConfig)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &stack{url: hs.URL, rdb: rdb, srv: srv}
}

// result is one sluicectl run.
type result struct {
	code           int
	stdout, stderr string
}

// run runs sluicectl with args against url; env holds extra SLUICE_*
// variables and stdin the standard input.
func run(t *testing.T, url, stdin string, env map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	getenv := func(k string) string {
		if k == "SLUICE_URL" {
			return url
		}
		return env[k]
	}
	code := Run(ctx, args, Env{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getenv: getenv,
		Clock: testenv.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
	})
	return result{code, out.String(), errOut.String()}
}
