package tenants

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// testAt is the audit time of test writes.
var testAt = time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)

// baseConfig parses a configuration with the given tenants, each a
// "name: {yaml}" line.
func baseConfig(t testing.TB, tenants ...string) *config.Config {
	t.Helper()
	y := "tenants:\n"
	for _, tn := range tenants {
		y += "  " + tn + "\n"
	}
	if len(tenants) == 0 {
		y = ""
	}
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, y)
	}
	return cfg
}

// fileTenant is a tenant line for baseConfig with its own key and rate.
func fileTenant(name string, rate float64) string {
	return fmt.Sprintf("%s: {api_keys: [%q], admission: {algorithm: gcra, limit: 10, burst: 5}, outflow: {rate: %g}}",
		name, config.HashKey("key-"+name), rate)
}

// newStore returns a Store on rdb.
func newStore(t testing.TB, rdb redis.UniversalClient) *Store {
	t.Helper()
	s, err := NewStore(StoreConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tenantName returns a fresh tenant id whose keys are checked for a TTL and
// removed when the test ends.
func tenantName(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	id := testenv.Name(t, "ten")
	t.Cleanup(func() {
		ctx := context.Background()
		for _, k := range []string{keys.Override(id), keys.Audit(id)} {
			if ttl, err := rdb.PTTL(ctx, k).Result(); err == nil && ttl == -1 {
				t.Errorf("key %s has no TTL", k)
			}
			rdb.Del(ctx, k)
		}
		rdb.SRem(ctx, keys.Tenants(), id)
	})
	return id
}

// privateRedis starts a private redis-server for tests that need the whole
// keyspace (registries read every tenant) or inject faults.
func privateRedis(t testing.TB) (*testenv.RedisProc, *redis.Client) {
	t.Helper()
	p := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: 1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return p, c
}

// applied records the configs a Registry applies.
type applied struct {
	mu   sync.Mutex
	cfgs []*config.Config
	at   []time.Time
	ch   chan struct{}
}

func newApplied() *applied { return &applied{ch: make(chan struct{}, 1)} }

func (a *applied) apply(c *config.Config) {
	a.mu.Lock()
	a.cfgs = append(a.cfgs, c)
	a.at = append(a.at, time.Now())
	a.mu.Unlock()
	select {
	case a.ch <- struct{}{}:
	default:
	}
}

// waitFor waits until the last applied config satisfies ok, at most d, and
// returns when it was applied.
func (a *applied) waitFor(t testing.TB, d time.Duration, what string, ok func(*config.Config) bool) time.Time {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		if n := len(a.cfgs); n > 0 && ok(a.cfgs[n-1]) {
			at := a.at[n-1]
			a.mu.Unlock()
			return at
		}
		a.mu.Unlock()
		select {
		case <-a.ch:
		case <-deadline.C:
			t.Fatalf("%s: not applied within %v", what, d)
		}
	}
}

// startRegistry runs a Registry on rdb over base until the test ends.
func startRegistry(t testing.TB, rdb redis.UniversalClient, base *config.Config, opts RegistryConfig) (*Registry, *applied) {
	t.Helper()
	opts.Store, opts.Redis, opts.Base = newStore(t, rdb), rdb, base
	r, err := NewRegistry(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	a := newApplied()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx, a.apply); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r, a
}

// rateOf is tenant's outflow rate in cfg, -1 when absent.
func rateOf(cfg *config.Config, tenant string) float64 {
	tn, ok := cfg.Tenants[tenant]
	if !ok {
		return -1
	}
	return tn.Outflow.Rate
}

// hasLine reports whether log holds a line containing all of words.
func hasLine(log string, words ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}

// waitSubscribers waits until n connections subscribe to the tenants channel.
func waitSubscribers(t testing.TB, rdb redis.UniversalClient, n int64) {
	t.Helper()
	testenv.WaitFor(t, 5*time.Second, fmt.Sprintf("%d subscribers", n), func() bool {
		m, err := rdb.PubSubNumSub(context.Background(), keys.TenantsChannel()).Result()
		return err == nil && m[keys.TenantsChannel()] >= n
	})
}
