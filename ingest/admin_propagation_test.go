package ingest_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/outflow"
)

// propagationBound is the requirement: an admin change reaches every ingest
// and drainer within 1 s.
const propagationBound = time.Second

// TestAdminChangeReachesEveryInstance runs two ingests and a drainer-side
// registry on one Redis. Each round PATCHes the tenant's admission limit and
// outflow rate on ingest A and measures when ingest B and the drainer
// registry have applied it (< 1 s); then B decides a submission under the
// new limit.
func TestAdminChangeReachesEveryInstance(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	clock := newFixedClock()
	base := adminConfig(t, tenantYAML("acme", "    admission: {algorithm: fixed_window, limit: 2, period: 1m}\n    outflow: {rate: 1}\n"))
	a := startAdminIngest(t, rdb, base, clock)
	b := startAdminIngest(t, rdb, base, clock)
	_, drainerSide := runRegistry(t, rdb, base, nil, nil)

	for i := range 2 {
		if r := b.post(t, "acme", "/v1/jobs", `{"type":"email"}`); r.status != http.StatusAccepted {
			t.Fatalf("job %d on B: %d %s", i, r.status, r.body)
		}
	}
	if r := b.post(t, "acme", "/v1/jobs", `{"type":"email"}`); r.status != http.StatusTooManyRequests {
		t.Fatalf("3rd job on B: %d, want 429 under limit 2: %s", r.status, r.body)
	}

	var worstB, worstD time.Duration
	for round, limit := range []int{5, 6, 7, 8, 9} {
		rate := float64(10 * limit)
		patch := `{"admission":{"limit":` + strconv.Itoa(limit) + `},"outflow":{"rate":` + strconv.Itoa(int(rate)) + `}}`
		start := time.Now()
		if r := a.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, patch); r.status != http.StatusOK {
			t.Fatalf("round %d: patch on A: %d %s", round, r.status, r.body)
		}
		atB := b.seen.waitFor(t, propagationBound, "ingest B", func(c *config.Config) bool {
			return c.Tenants["acme"].Admission.Limit == int64(limit)
		})
		atD := drainerSide.waitFor(t, propagationBound, "drainer registry", func(c *config.Config) bool {
			return c.Tenants["acme"].Outflow.Rate == rate
		})
		worstB, worstD = max(worstB, atB.Sub(start)), max(worstD, atD.Sub(start))
		t.Logf("round %d: ingest B after %v, drainer registry after %v", round, atB.Sub(start), atD.Sub(start))
	}
	if worstB >= propagationBound || worstD >= propagationBound {
		t.Errorf("worst propagation: ingest %v, drainer %v; want both < %v", worstB, worstD, propagationBound)
	}

	// B now decides under limit 9: 2 of 9 used in this window.
	r := b.post(t, "acme", "/v1/jobs", `{"type":"email"}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("job on B after the change: %d, want 202: %s", r.status, r.body)
	}
	if got := r.header.Get("RateLimit-Policy"); !strings.Contains(got, "q=9") {
		t.Errorf("RateLimit-Policy %q, want q=9", got)
	}
}

// TestAdminOutflowRateOnNextTake changes a tenant's outflow rate through the
// admin API: the shared leaky bucket uses it at its very next take, even by
// a drainer that still passes the old configured rate.
func TestAdminOutflowRateOnNextTake(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	ctx := context.Background()
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML("acme", "    outflow: {rate: 1, capacity: 1}\n")), nil)
	leaky := outflow.NewBucket(rdb)
	stale := outflow.Limit{Rate: 1, Capacity: 1} // what a not-yet-updated drainer passes
	now := time.Unix(1_900_000_000, 0)
	first, err := leaky.TakeAt(ctx, "acme", stale, 1, now)
	if err != nil || !first.Allowed {
		t.Fatalf("first take: %+v, %v", first, err)
	}
	if r, _ := leaky.TakeAt(ctx, "acme", stale, 1, now); r.Allowed || r.Wait != time.Second {
		t.Fatalf("second take at rate 1: %+v, want a wait of 1s", r)
	}
	if r := h.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, `{"outflow":{"rate":20,"capacity":1}}`); r.status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	r, err := leaky.TakeAt(ctx, "acme", stale, 1, now)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rate != 20 || r.Allowed || r.Wait != 50*time.Millisecond {
		t.Errorf("next take after the change: %+v, want rate 20 and a wait of 1/20 s", r)
	}
	if r, _ := leaky.TakeAt(ctx, "acme", stale, 1, now.Add(50*time.Millisecond)); !r.Allowed {
		t.Errorf("take 50ms later: %+v, want allowed at rate 20", r)
	}
}

// TestAdminGCRAUpgradeRescales exhausts a GCRA tenant (1/s, burst 5) and a
// GCRA job type at a fixed instant, upgrades both to 10/s through the admin
// API, and checks that each stored TAT was rescaled (5 s of debt becomes
// 0.5 s) so the tenant is admitted again 0.1 s later instead of after the
// old penalty.
func TestAdminGCRAUpgradeRescales(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	ctx := context.Background()
	clock := newFixedClock()
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML("acme",
		"    admission: {algorithm: gcra, limit: 1, period: 1s, burst: 5}\n"+
			"    job_types: {encode: {admission: {algorithm: gcra, limit: 2, period: 2s, burst: 5}}}\n")), clock)
	if r := h.post(t, "acme", "/v1/jobs:batch", `{"jobs":[{"type":"encode"},{"type":"encode"},{"type":"encode"},{"type":"encode"},{"type":"encode"}]}`); r.status != http.StatusAccepted {
		t.Fatalf("burst of 5: %d %s", r.status, r.body)
	}
	r := h.post(t, "acme", "/v1/jobs", `{"type":"encode"}`)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" {
		t.Fatalf("6th job: %d Retry-After %q, want 429 after 1 s: %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	tat := func(policy string) time.Duration {
		v, err := rdb.Get(ctx, keys.Admission("acme", "gcra", policy)).Int64()
		if err != nil {
			t.Fatalf("TAT of %s: %v", policy, err)
		}
		return time.UnixMicro(v).Sub(clock.Now())
	}
	if d1, d2 := tat("tenant"), tat("type.encode"); d1 != 5*time.Second || d2 != 5*time.Second {
		t.Fatalf("debts before: %v and %v, want 5s each", d1, d2)
	}
	patch := `{"admission":{"limit":10},"job_types":{"encode":{"admission":{"limit":20}}}}`
	if r := h.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, patch); r.status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	if d1, d2 := tat("tenant"), tat("type.encode"); d1 != 500*time.Millisecond || d2 != 500*time.Millisecond {
		t.Errorf("debts after the upgrade: %v and %v, want 500ms each (5 requests × 0.1 s)", d1, d2)
	}
	if r := h.post(t, "acme", "/v1/jobs", `{"type":"encode"}`); r.status != http.StatusTooManyRequests {
		t.Errorf("at once after the upgrade: %d, want 429 (burst still spent): %s", r.status, r.body)
	}
	clock.Advance(100 * time.Millisecond)
	if r := h.post(t, "acme", "/v1/jobs", `{"type":"encode"}`); r.status != http.StatusAccepted {
		t.Errorf("0.1 s after the upgrade: %d, want 202 (unrescaled it would wait 4.6 s): %s", r.status, r.body)
	}
}

// TestAdminGCRACutKeepsTheDebt: a GCRA tenant that spent its whole burst
// (1000/s, a job of cost 1000) and is then cut to 1/s is refused at once
// after the cut, and admitted one emission interval later. Before, its
// debt (1000 requests at 1/s: TAT 1000 s ahead) was past the new τ, which
// gcra.lua reads as another policy's state and forgets: the next request
// got a fresh burst.
func TestAdminGCRACutKeepsTheDebt(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	clock := newFixedClock()
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML("acme",
		"    admission: {algorithm: gcra, limit: 1000, period: 1s}\n")), clock)
	if r := h.post(t, "acme", "/v1/jobs", `{"type":"t","cost":1000}`); r.status != http.StatusAccepted {
		t.Fatalf("a job of cost 1000: %d %s", r.status, r.body)
	}
	if r := h.admin(t, http.MethodPatch, "/admin/v1/tenants/acme", aliceToken, `{"admission":{"limit":1}}`); r.status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	if r := h.post(t, "acme", "/v1/jobs", `{"type":"t"}`); r.status != http.StatusTooManyRequests {
		t.Errorf("at once after the cut: %d, want 429 (the debt kept, capped at the new burst): %s", r.status, r.body)
	}
	clock.Advance(time.Second)
	if r := h.post(t, "acme", "/v1/jobs", `{"type":"t"}`); r.status != http.StatusAccepted {
		t.Errorf("1 s after the cut: %d, want 202: %s", r.status, r.body)
	}
}
