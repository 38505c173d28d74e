package limits

import (
	"context"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// admBase is an instant (unix seconds) aligned to 10 s and 60 s windows, so
// the tables below can reason about window boundaries.
const admBase = 1_700_000_040

// admAt returns admBase + sec seconds, exact to the µs.
func admAt(sec float64) time.Time {
	return time.UnixMicro(admBase*1_000_000 + int64(math.Round(sec*1e6)))
}

// admModes are the Admitter configurations every behaviour test runs with.
var admModes = []struct {
	name string
	cfg  AdmitterConfig
}{
	{"batched", AdmitterConfig{}},
	{"unbatched", AdmitterConfig{Unbatched: true}},
}

// admNew returns an Admitter on rdb, configured by cfg (at most one; none:
// the defaults).
func admNew(t testing.TB, rdb redis.UniversalClient, cfg ...AdmitterConfig) *Admitter {
	t.Helper()
	var c AdmitterConfig
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.Redis = rdb
	a, err := NewAdmitter(c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// admTenant returns a fresh tenant. When the test ends it checks requirement
// (c) for every key the test left for that tenant — each must have a TTL —
// and then deletes them.
func admTenant(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	tenant := testenv.Name(t, "lim")
	t.Cleanup(func() {
		ctx := context.Background()
		for _, k := range admKeys(t, rdb, tenant) {
			pttl, err := rdb.PTTL(ctx, k).Result()
			if err != nil {
				t.Errorf("PTTL %s: %v", k, err)
				continue
			}
			// -1: the key exists without a TTL. (-2: it expired since SCAN.)
			if pttl == -1 {
				t.Errorf("key %s has no TTL", k)
			}
			rdb.Del(ctx, k)
		}
	})
	return tenant
}

// admKeys lists the tenant's keys, on every master of a cluster.
func admKeys(t testing.TB, rdb redis.UniversalClient, tenant string) []string {
	t.Helper()
	ctx := context.Background()
	var (
		mu  sync.Mutex
		out []string
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, "sluice:{"+tenant+"}*", 5000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			out = append(out, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		t.Fatalf("admKeys: unsupported client %T", rdb)
	}
	if err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	sort.Strings(out)
	return out
}

// admDump returns DUMP of every key of the tenant: its state, byte for byte.
func admDump(t testing.TB, rdb redis.UniversalClient, tenant string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range admKeys(t, rdb, tenant) {
		v, err := rdb.Dump(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		out[k] = v
	}
	return out
}

// admOne decides one policy alone and returns its Result.
func admOne(t testing.TB, a *Admitter, tenant string, p Policy, cost int64, now time.Time) Result {
	t.Helper()
	d, err := a.Admit(context.Background(), Request{Tenant: tenant, Policies: []Policy{p}, Cost: cost, Now: now})
	if err != nil {
		t.Fatalf("Admit(cost %d at %v): %v", cost, now, err)
	}
	if d.Allowed != d.Results[0].Allowed {
		t.Fatalf("Decision.Allowed %v but Results[0].Allowed %v", d.Allowed, d.Results[0].Allowed)
	}
	return d.Results[0]
}
