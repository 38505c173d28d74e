package tenants

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// propagationBound is the requirement: a change reaches every process
// within 1 s. The tests that measure it run serially (no t.Parallel), so
// the CPU-heavy parallel tests (the audit's 1 MiB fills) cannot delay them
// past the bound on a small machine.
const propagationBound = time.Second

// TestRegistryMergesAndPropagates changes tenants through one registry and
// watches another apply each change: runtime specs win over the file,
// tombstones remove file tenants, and a new file keeps the admin changes.
func TestRegistryMergesAndPropagates(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	base := baseConfig(t, fileTenant("a", 5), fileTenant("b", 1))
	admin, _ := startRegistry(t, rdb, base, RegistryConfig{})
	reg := prometheus.NewRegistry()
	watcher, seen := startRegistry(t, rdb, base, RegistryConfig{Registerer: reg})

	start := time.Now()
	res, err := admin.Patch(ctx, "a", []byte(`{"outflow":{"rate":20}}`), "alice", testAt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Created || res.Source != SourceRuntime || res.Version != 1 || res.Spec.Outflow.Rate != 20 || res.Old.Outflow.Rate != 5 {
		t.Errorf("patch result = %+v", res)
	}
	at := seen.waitFor(t, propagationBound, "patched rate of a", func(c *config.Config) bool { return rateOf(c, "a") == 20 })
	t.Logf("patch applied by the other registry after %v", at.Sub(start))
	if got := rateOf(admin.Config(), "a"); got != 20 {
		t.Errorf("the writing registry's own config has rate %v, want 20 at once (Refresh)", got)
	}

	newSpec := config.Tenant{APIKeys: []string{config.HashKey("key-c")}, Outflow: config.Outflow{Rate: 3}}
	if res, err := admin.Put(ctx, "c", newSpec, "alice", testAt); err != nil || !res.Created {
		t.Fatalf("put c = %+v, %v; want created", res, err)
	}
	seen.waitFor(t, propagationBound, "new tenant c", func(c *config.Config) bool { return rateOf(c, "c") == 3 })

	if _, err := admin.Delete(ctx, "b", "bob", testAt); err != nil {
		t.Fatal(err)
	}
	seen.waitFor(t, propagationBound, "tombstoned b", func(c *config.Config) bool { return rateOf(c, "b") == -1 })
	if rec, _ := admin.Store().Get(ctx, "b"); !rec.Deleted {
		t.Errorf("record of b = %+v, want a tombstone (b is in the file)", rec)
	}

	// A new file: a's rate changes in the file, b is still there, d is new.
	watcher.SetBase(baseConfig(t, fileTenant("a", 7), fileTenant("b", 1), fileTenant("d", 2)))
	got := watcher.Config()
	for _, w := range []struct {
		tenant string
		rate   float64
	}{{"a", 20}, {"b", -1}, {"c", 3}, {"d", 2}} {
		if r := rateOf(got, w.tenant); r != w.rate {
			t.Errorf("after a file reload, %s has rate %v, want %v", w.tenant, r, w.rate)
		}
	}

	// Deleting a runtime-only tenant removes its record; no tombstone.
	if _, err := admin.Delete(ctx, "c", "bob", testAt); err != nil {
		t.Fatal(err)
	}
	seen.waitFor(t, propagationBound, "deleted c", func(c *config.Config) bool { return rateOf(c, "c") == -1 })
	if rec, _ := admin.Store().Get(ctx, "c"); rec.Deleted || rec.Spec != nil {
		t.Errorf("record of c = %+v, want neither spec nor tombstone", rec)
	}
	if _, err := admin.Delete(ctx, "c", "bob", testAt); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting c again: %v, want ErrNotFound", err)
	}
	if _, err := admin.Patch(ctx, "nope", []byte(`{}`), "bob", testAt); !errors.Is(err, ErrNotFound) {
		t.Errorf("patching an unknown tenant: %v, want ErrNotFound", err)
	}
	if n := testutil.ToFloat64(watcher.m.updates.WithLabelValues(SourceFile)); n != 1 {
		t.Errorf("updates{source=file} = %v, want 1", n)
	}
	if v := testutil.ToFloat64(watcher.m.version); v < 4 {
		t.Errorf("sluice_tenant_config_version = %v, want >= 4 (four writes)", v)
	}
}

// TestRegistryPollCatchesLostMessage stores a change without publishing it
// (as when the subscriber was disconnected at that instant): the version
// poll finds it within the bound.
func TestRegistryPollCatchesLostMessage(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	base := baseConfig(t, fileTenant("a", 5), fileTenant("b", 1))
	r, seen := startRegistry(t, rdb, base, RegistryConfig{})
	// An announced change first, once r's subscription is up, and then until
	// r has handled both its pubsub events (the subscription and the
	// message): the next change can only be found by the poll.
	waitSubscribers(t, rdb, 1)
	w, _ := startRegistry(t, rdb, base, RegistryConfig{})
	waitSubscribers(t, rdb, 2)
	if _, err := w.Patch(ctx, "b", []byte(`{"outflow":{"rate":2}}`), "alice", testAt); err != nil {
		t.Fatal(err)
	}
	seen.waitFor(t, propagationBound, "announced change", func(c *config.Config) bool { return rateOf(c, "b") == 2 })
	testenv.WaitFor(t, propagationBound, "r's two pubsub reads", func() bool {
		return testutil.ToFloat64(r.m.reads.WithLabelValues(SourcePubSub)) >= 2
	})
	polled := testutil.ToFloat64(r.m.updates.WithLabelValues(SourcePoll))

	spec := config.Tenant{Outflow: config.Outflow{Rate: 9}}.WithDefaults()
	raw, _ := EncodeSpec(spec)
	start := time.Now()
	unannounced := tenantWrite{tenant: "a", mode: "put", spec: string(raw), rate: "9", capacity: "9", audit: `{}`}
	if err := unannounced.call().Run(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.SAdd(ctx, keys.Tenants(), "a")
	rdb.Incr(ctx, keys.TenantsVersion()) // no PUBLISH
	at := seen.waitFor(t, propagationBound, "unannounced change", func(c *config.Config) bool { return rateOf(c, "a") == 9 })
	t.Logf("found by the poll after %v", at.Sub(start))
	if n := testutil.ToFloat64(r.m.updates.WithLabelValues(SourcePoll)); n != polled+1 {
		t.Errorf("updates{source=poll} = %v, want %v", n, polled+1)
	}
}

// TestRegistryResubscribes kills the registry's Pub/Sub connection (CLIENT
// KILL): go-redis reconnects, the resubscription triggers a full read, and a
// change made right after the kill still lands within the bound.
func TestRegistryResubscribes(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	base := baseConfig(t, fileTenant("a", 5))
	_, seen := startRegistry(t, rdb, base, RegistryConfig{})
	admin, _ := startRegistry(t, rdb, base, RegistryConfig{})
	for i, rate := range []float64{11, 12, 13} {
		if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := admin.Patch(ctx, "a", []byte(`{"outflow":{"rate":`+itoa(int64(rate))+`}}`), "alice", testAt); err != nil {
			t.Fatal(err)
		}
		at := seen.waitFor(t, propagationBound, "change after a killed subscription", func(c *config.Config) bool { return rateOf(c, "a") == rate })
		t.Logf("round %d: applied %v after the kill", i, at.Sub(start))
	}
}

// TestRegistryKeepsConfigWhileRedisDown stops Redis under a registry with an
// admin change applied: the change stays in force, the failure is counted
// and logged once; when Redis is back (empty: no persistence) the registry
// reads it again by itself.
func TestRegistryKeepsConfigWhileRedisDown(t *testing.T) {
	proc, rdb := privateRedis(t)
	ctx := context.Background()
	var logs testenv.LogBuffer
	base := baseConfig(t, fileTenant("a", 5))
	r, seen := startRegistry(t, rdb, base, RegistryConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, err := r.Patch(ctx, "a", []byte(`{"outflow":{"rate":20}}`), "alice", testAt); err != nil {
		t.Fatal(err)
	}
	seen.waitFor(t, propagationBound, "patch", func(c *config.Config) bool { return rateOf(c, "a") == 20 })

	proc.Stop()
	testenv.WaitFor(t, 5*time.Second, "two read errors counted after Redis stopped", func() bool {
		return testutil.ToFloat64(r.m.errors.WithLabelValues("read")) >= 2
	})
	if got := rateOf(r.Config(), "a"); got != 20 {
		t.Errorf("with Redis down the rate is %v, want the admin change (20) kept", got)
	}
	proc.Start()
	seen.waitFor(t, 5*time.Second, "config read again after Redis came back", func(c *config.Config) bool { return rateOf(c, "a") == 5 })
	out := logs.String()
	if !hasLine(out, "cannot read runtime tenants") || !hasLine(out, "readable again") {
		t.Errorf("log lacks the failure or the recovery:\n%s", out)
	}
	if n := bytes.Count([]byte(out), []byte("cannot read runtime tenants")); n != 1 {
		t.Errorf("failure logged %d times, want once per outage", n)
	}
}

// TestRegistryInvalidMergeSetsAside gives a registry a file whose new
// tenant uses a runtime tenant's API key: the merge fails validation, the
// new file tenant (the change that brought the clash) is applied without
// that key, the runtime tenant keeps it, the rest of the file applies, and
// the failure is counted.
func TestRegistryInvalidMergeSetsAside(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	r, _ := startRegistry(t, rdb, baseConfig(t, fileTenant("a", 5)), RegistryConfig{})
	if _, err := r.Put(ctx, "b", config.Tenant{APIKeys: []string{config.HashKey("key-z")}}, "alice", testAt); err != nil {
		t.Fatal(err)
	}
	r.SetBase(baseConfig(t, fileTenant("a", 7), fileTenant("z", 1)))
	cfg := r.Config()
	if z, ok := cfg.Tenants["z"]; !ok || len(z.APIKeys) != 0 || z.Outflow.Rate != 1 {
		t.Errorf("file tenant z: %+v (present %v), want it applied without runtime b's key", z.APIKeys, ok)
	}
	if got := cfg.Tenants["a"].Outflow.Rate; got != 7 || len(cfg.Tenants["b"].APIKeys) != 1 {
		t.Errorf("a's rate %v (want the new file's 7), b's keys %v (want kept)", got, cfg.Tenants["b"].APIKeys)
	}
	if n := testutil.ToFloat64(r.m.errors.WithLabelValues("invalid")); n != 1 {
		t.Errorf("errors{reason=invalid} = %v, want 1", n)
	}
	// The admin API refuses the same clash up front, naming the field.
	_, err := r.Put(ctx, "c", config.Tenant{APIKeys: []string{config.HashKey("key-a")}}, "alice", testAt)
	se, ok := IsSpecError(err)
	if !ok || len(se.Problems) == 0 {
		t.Fatalf("put with another tenant's key: %v, want a *SpecError", err)
	}
}

// TestRegistryOneKeyTwoRuntimeTenants: runtime records that hold one API
// key (two admins racing: each write validated before the other's landed)
// cost that key only: every tenant applies, every other change still
// applies, on a running registry and on one started afresh (a restart),
// which used to fall back to the file's tenants alone (a file tenant paused
// at runtime was delivered again). A tenant that takes a key another
// already holds loses it on a running registry; one started afresh, which
// cannot tell which came first, takes it from both.
func TestRegistryOneKeyTwoRuntimeTenants(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	base := baseConfig(t, fileTenant("f", 5))
	r, _ := startRegistry(t, rdb, base, RegistryConfig{})
	paused := r.Config().Tenants["f"]
	paused.Outflow.Paused = true
	if _, err := r.Put(ctx, "f", paused, "alice", testAt); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Put(ctx, "h", config.Tenant{APIKeys: []string{config.HashKey("key-h")}}, "alice", testAt); err != nil {
		t.Fatal(err)
	}
	dup := config.Tenant{APIKeys: []string{config.HashKey("key-dup")}}.WithDefaults()
	for _, id := range []string{"x", "y"} {
		if _, err := r.store.Write(ctx, Change{Tenant: id, Op: OpPut, Spec: dup, Who: "race", At: testAt, Action: ActionCreate}); err != nil {
			t.Fatal(err)
		}
	}
	taken := config.Tenant{APIKeys: []string{config.HashKey("key-h"), config.HashKey("key-h2")}}.WithDefaults()
	if _, err := r.store.Write(ctx, Change{Tenant: "g", Op: OpPut, Spec: taken, Who: "race", At: testAt, Action: ActionCreate}); err != nil {
		t.Fatal(err)
	}
	keysOf := func(reg *Registry, id string) []string {
		tn, ok := reg.Config().Tenants[id]
		if !ok {
			t.Errorf("tenant %s not applied", id)
		}
		return tn.APIKeys
	}
	check := func(name string, reg *Registry, hKeys, maxDup int) {
		t.Helper()
		testenv.WaitFor(t, 5*time.Second, name+": the records merged", func() bool {
			_ = reg.Sync(ctx)
			_, g := reg.Config().Tenants["g"]
			return g && reg.Config().Tenants["f"].Outflow.Paused
		})
		// Never both: from the one that took it (a running registry that
		// merged x before y was written), or from both (merged together,
		// or a fresh registry).
		if holders := len(keysOf(reg, "x")) + len(keysOf(reg, "y")); holders > maxDup {
			t.Errorf("%s: %d of x and y hold the key both were given, want at most %d", name, holders, maxDup)
		}
		if k := keysOf(reg, "g"); len(k) != 1 || k[0] != config.HashKey("key-h2") {
			t.Errorf("%s: g holds %v, want only its own key-h2", name, k)
		}
		if k := keysOf(reg, "h"); len(k) != hKeys {
			t.Errorf("%s: h holds %v, want %d key(s)", name, k, hKeys)
		}
	}
	check("running", r, 1, 1)
	// A later change of another tenant applies (it froze before).
	if _, err := r.Put(ctx, "later", config.Tenant{APIKeys: []string{config.HashKey("key-later")}}, "alice", testAt); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Config().Tenants["later"]; !ok {
		t.Error("running: a tenant created after the clash was not applied")
	}
	fresh, _ := startRegistry(t, rdb, base, RegistryConfig{})
	check("restarted", fresh, 0, 0)
	// Mending one of the two gives the other its key back.
	if _, err := r.store.Write(ctx, Change{Tenant: "y", Expect: 1, Op: OpPut, Who: "bob", At: testAt, Action: ActionUpdate,
		Spec: config.Tenant{APIKeys: []string{config.HashKey("key-y")}}.WithDefaults()}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "x holds its key once y is mended", func() bool {
		_ = r.Sync(ctx)
		return len(r.Config().Tenants["x"].APIKeys) == 1
	})
}

// TestRegistryAdminTokenTakesAKey: a new file whose admin token is a
// runtime tenant's API key applies, the tenant keeping its spec without
// that key, on a running registry and on one started afresh. Before, the
// running config stayed (the file's other changes unapplied) and a fresh
// registry dropped every runtime tenant.
func TestRegistryAdminTokenTakesAKey(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	r, _ := startRegistry(t, rdb, baseConfig(t, fileTenant("a", 5)), RegistryConfig{})
	paused := config.Tenant{APIKeys: []string{config.HashKey("shared"), config.HashKey("own")}, Outflow: config.Outflow{Paused: true}}
	if _, err := r.Put(ctx, "b", paused, "alice", testAt); err != nil {
		t.Fatal(err)
	}
	nb := baseConfig(t, fileTenant("a", 7))
	nb.Ingest.AdminTokens = map[string]string{"ops": config.HashKey("shared")}
	r.SetBase(nb)
	fresh, _ := startRegistry(t, rdb, nb, RegistryConfig{})
	for name, reg := range map[string]*Registry{"running": r, "restarted": fresh} {
		_ = reg.Sync(ctx)
		cfg := reg.Config()
		b, ok := cfg.Tenants["b"]
		if !ok || !b.Outflow.Paused || len(b.APIKeys) != 1 || b.APIKeys[0] != config.HashKey("own") {
			t.Errorf("%s: b %+v (present %v), want it paused, holding only its own key", name, b.APIKeys, ok)
		}
		if cfg.Tenants["a"].Outflow.Rate != 7 || cfg.Ingest.AdminTokens["ops"] == "" {
			t.Errorf("%s: the new file is not applied (a's rate %v, admin tokens %v)", name, cfg.Tenants["a"].Outflow.Rate, cfg.Ingest.AdminTokens)
		}
	}
}

// TestRegistryAppliesAnOlderSpec: a runtime spec stored by an older version
// that today's bounds refuse (a sliding_log limit above 10,000) is applied
// as stored, with the other tenants, rather than vanishing or freezing the
// registry.
func TestRegistryAppliesAnOlderSpec(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	r, _ := startRegistry(t, rdb, baseConfig(t), RegistryConfig{})
	old := config.Tenant{APIKeys: []string{config.HashKey("key-old")},
		Admission: config.Admission{Algorithm: "sliding_log", Limit: 50000, Period: time.Second}}.WithDefaults()
	if _, err := r.store.Write(ctx, Change{Tenant: "old", Op: OpPut, Spec: old, Who: "v0", At: testAt, Action: ActionCreate}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Put(ctx, "new", config.Tenant{APIKeys: []string{config.HashKey("key-new")}}, "alice", testAt); err != nil {
		t.Fatal(err)
	}
	for _, reg := range []*Registry{r, func() *Registry { f, _ := startRegistry(t, rdb, baseConfig(t), RegistryConfig{}); return f }()} {
		_ = reg.Sync(ctx)
		if got := reg.Config().Tenants["old"].Admission.Limit; got != 50000 {
			t.Errorf("the older spec's limit reads %d, want it applied as stored (50000)", got)
		}
		if _, ok := reg.Config().Tenants["new"]; !ok {
			t.Error("a tenant written after the older spec was not applied")
		}
	}
}

// TestRegistryCluster runs the propagation over a Redis Cluster: the write
// script runs on the tenant's slot, the set, counter and channel elsewhere.
func TestRegistryCluster(t *testing.T) {
	rdb := testenv.Cluster(t)
	ctx := context.Background()
	id := tenantName(t, rdb)
	base := baseConfig(t, fileTenant(id, 5))
	admin, _ := startRegistry(t, rdb, base, RegistryConfig{})
	_, seen := startRegistry(t, rdb, base, RegistryConfig{})
	start := time.Now()
	if _, err := admin.Patch(ctx, id, []byte(`{"outflow":{"rate":8}}`), "alice", testAt); err != nil {
		t.Fatal(err)
	}
	at := seen.waitFor(t, propagationBound, "cluster patch", func(c *config.Config) bool { return rateOf(c, id) == 8 })
	t.Logf("applied after %v", at.Sub(start))
}

func TestNewRegistryNeedsDeps(t *testing.T) {
	t.Parallel()
	if _, err := NewRegistry(RegistryConfig{}); err == nil || !strings.Contains(err.Error(), "Redis and Base") {
		t.Errorf("NewRegistry without Redis and Base: error %v, want one naming them", err)
	}
	if _, err := NewStore(StoreConfig{}); err == nil || !strings.Contains(err.Error(), "Redis") {
		t.Errorf("NewStore without Redis: error %v, want one naming it", err)
	}
}
