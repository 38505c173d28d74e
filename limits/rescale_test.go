package limits

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

func gcraPolicy(limit int64, period time.Duration, burst int64) Policy {
	return Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: limit, Period: period, Burst: burst}
}

// TestRescaleGCRAFormula sets a TAT, rescales it at a fixed instant and
// checks TAT' = now + ⌈(TAT − now) × T_new / T_old⌉ and its PX TTL.
func TestRescaleGCRAFormula(t *testing.T) {
	t.Parallel()
	now := admAt(10)
	for _, tc := range []struct {
		name     string
		ahead    time.Duration // TAT − now before; < 0 for a TAT in the past, 0 with noKey for no key
		noKey    bool
		old, new Policy
		want     time.Duration // TAT' − now; the old value when unchanged
		changed  bool
	}{
		{"upgrade 1/s to 10/s", 5 * time.Second, false, gcraPolicy(1, time.Second, 5), gcraPolicy(10, time.Second, 5), 500 * time.Millisecond, true},
		{"downgrade 10/s to 1/s", 300 * time.Millisecond, false, gcraPolicy(10, time.Second, 5), gcraPolicy(1, time.Second, 5), 3 * time.Second, true},
		{"period change only", 2 * time.Second, false, gcraPolicy(60, time.Minute, 10), gcraPolicy(60, 30*time.Second, 10), time.Second, true},
		// T_old = ⌈1e6/3⌉ = 333334 µs, T_new = ⌈1e6/7⌉ = 142858 µs:
		// 1e6 × 142858 / 333334 = 428573.99…, rounded up.
		{"rounded up to the µs", time.Second, false, gcraPolicy(3, time.Second, 3), gcraPolicy(7, time.Second, 3), 428574 * time.Microsecond, true},
		{"same interval", 4 * time.Second, false, gcraPolicy(1, time.Second, 5), gcraPolicy(1, time.Second, 9), 4 * time.Second, true},
		// A cut whose debt passes the new τ: capped at τ_new, a full bucket
		// (gcra.lua forgot a TAT further ahead, so the cut gave a fresh
		// burst): 1000/s cut to 1/s after 1000 requests, τ_new = 1 × 1 s.
		{"a cut capped at the new tau", time.Second, false, gcraPolicy(1000, time.Second, 1000), gcraPolicy(1, time.Second, 1), time.Second, true},
		{"burst 0 is the limit (the default)", 5 * time.Second, false, gcraPolicy(1, time.Second, 5), gcraPolicy(1, time.Second, 0), time.Second, true},
		{"a lowered burst caps the debt", 4 * time.Second, false, gcraPolicy(1, time.Second, 5), gcraPolicy(1, time.Second, 2), 2 * time.Second, true},
		{"no debt", -time.Second, false, gcraPolicy(1, time.Second, 5), gcraPolicy(10, time.Second, 5), -time.Second, false},
		{"tat exactly now", 0, false, gcraPolicy(1, time.Second, 5), gcraPolicy(10, time.Second, 5), 0, false},
		{"no key", 0, true, gcraPolicy(1, time.Second, 5), gcraPolicy(10, time.Second, 5), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			for _, c := range []struct {
				name string
				rdb  redis.UniversalClient
			}{{"standalone", testenv.Redis(t)}, {"cluster", testenv.Cluster(t)}} {
				t.Run(c.name, func(t *testing.T) {
					tenant := admTenant(t, c.rdb)
					key := keys.Admission(tenant, "gcra", "tenant")
					tat := now.Add(tc.ahead)
					if !tc.noKey {
						if err := c.rdb.Set(ctx, key, strconv.FormatInt(tat.UnixMicro(), 10), time.Minute).Err(); err != nil {
							t.Fatal(err)
						}
					}
					got, err := RescaleGCRA(ctx, c.rdb, tenant, tc.old, tc.new, now)
					if err != nil {
						t.Fatal(err)
					}
					want := Rescaled{Changed: tc.changed, TAT: now.Add(tc.want), Now: now}
					if tc.noKey {
						want.TAT = time.Time{}
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("RescaleGCRA (-want +got):\n%s", diff)
					}
					if tc.noKey {
						if n, _ := c.rdb.Exists(ctx, key).Result(); n != 0 {
							t.Errorf("a rescale without state created %s", key)
						}
						return
					}
					stored, err := c.rdb.Get(ctx, key).Int64()
					if err != nil || stored != want.TAT.UnixMicro() {
						t.Errorf("stored TAT = %d (%v), want %d", stored, err, want.TAT.UnixMicro())
					}
					pttl, _ := c.rdb.PTTL(ctx, key).Result()
					wantTTL := time.Minute // untouched
					if tc.changed {
						wantTTL = time.Duration((tc.want.Microseconds()+999)/1000) * time.Millisecond
					}
					if pttl > wantTTL || pttl < wantTTL-200*time.Millisecond {
						t.Errorf("PTTL = %v, want %v (at most 200ms less, time spent since)", pttl, wantTTL)
					}
				})
			}
		})
	}
}

// TestRescaleGCRAUpgradedTenant exhausts a tenant under 1/s with burst 5 and
// upgrades it to 10/s: rescaled, its next request waits one new interval
// (0.1 s), its debt converted; not rescaled, the old TAT (further ahead than
// the new τ) is forgotten instead of costing 4.6 s.
func TestRescaleGCRAUpgradedTenant(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	a := admNew(t, rdb)
	oldP, newP := gcraPolicy(1, time.Second, 5), gcraPolicy(10, time.Second, 5)
	exhaust := func(tenant string) {
		t.Helper()
		if r := admOne(t, a, tenant, oldP, 5, admAt(1)); !r.Allowed {
			t.Fatalf("burst of 5 refused: %+v", r)
		}
		if r := admOne(t, a, tenant, oldP, 1, admAt(1)); r.Allowed || r.RetryAfter != time.Second {
			t.Fatalf("6th request: %+v, want refused with RetryAfter 1s", r)
		}
	}

	t.Run("without rescale", func(t *testing.T) {
		tenant := admTenant(t, rdb)
		exhaust(tenant)
		// The old debt (TAT 5 s ahead) is more than the new τ (0.5 s): no
		// commit of the new plan leaves such a TAT, so the script forgets it
		// (gcra.lua) rather than make the tenant wait 4.6 s; the rescale
		// below keeps the debt, converted.
		r := admOne(t, a, tenant, newP, 1, admAt(1))
		if !r.Allowed {
			t.Errorf("under the new plan: %+v, want allowed (a TAT beyond τ is forgotten)", r)
		}
	})
	t.Run("rescaled", func(t *testing.T) {
		tenant := admTenant(t, rdb)
		exhaust(tenant)
		res, err := RescaleGCRA(context.Background(), rdb, tenant, oldP, newP, admAt(1))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Changed || !res.TAT.Equal(admAt(1.5)) {
			t.Fatalf("rescale = %+v, want TAT at +1.5s (5 requests × 0.1 s)", res)
		}
		r := admOne(t, a, tenant, newP, 1, admAt(1))
		want := Result{Policy: "tenant", Allowed: false, Limit: 5, Remaining: 0, RetryAfter: 100 * time.Millisecond, ResetAfter: 500 * time.Millisecond}
		if diff := cmp.Diff(want, r); diff != "" {
			t.Errorf("at once after the upgrade (-want +got):\n%s", diff)
		}
		if r := admOne(t, a, tenant, newP, 1, admAt(1.1)); !r.Allowed {
			t.Errorf("0.1 s after the upgrade: %+v, want admitted", r)
		}
		if r := admOne(t, a, tenant, newP, 5, admAt(1.6)); !r.Allowed {
			t.Errorf("a full burst 0.6 s after the upgrade: %+v, want admitted (debt paid by +1.5 s, +0.1 s for the request at 1.1)", r)
		}
	})
}

func TestRescaleGCRARefusesBadInput(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	g := gcraPolicy(1, time.Second, 1)
	fw := Policy{Name: "tenant", Algorithm: AlgFixedWindow, Limit: 1, Period: time.Second}
	for _, tc := range []struct {
		name, tenant string
		old, new     Policy
	}{
		{"not gcra", "t", fw, g},
		{"bad tenant", "a{b}", g, g},
		{"invalid policy", "t", g, gcraPolicy(0, time.Second, 1)},
	} {
		if _, err := RescaleGCRA(ctx, rdb, tc.tenant, tc.old, tc.new, admAt(1)); err == nil {
			t.Errorf("%s: RescaleGCRA = nil error, want one", tc.name)
		}
	}
}

// TestRescaleReplyRejectsMalformed: gcra_rescale.lua's reply is checked
// element by element; a wrong shape is an error wrapping lua.ErrReply that
// names the script, never a Rescaled.
func TestRescaleReplyRejectsMalformed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		reply any
		want  string
	}{
		{"not an array", "OK", "want an array"},
		{"short", []any{int64(1), int64(2)}, "2 elements, want 3"},
		{"string element", []any{int64(1), "2", int64(3)}, "element 2 is string"},
		{"flag", []any{int64(2), int64(2), int64(3)}, "rescaled is 2"},
		{"negative tat", []any{int64(0), int64(-1), int64(3)}, "tat -1"},
		{"zero now", []any{int64(0), int64(0), int64(0)}, "now 0"},
	} {
		_, err := rescaleReply(c.reply)
		if !errors.Is(err, lua.ErrReply) || !strings.Contains(err.Error(), "gcra_rescale.lua") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: rescaleReply(%v) error = %v, want lua.ErrReply naming gcra_rescale.lua and %q", c.name, c.reply, err, c.want)
		}
	}
	got, err := rescaleReply([]any{int64(1), int64(5_000_000), int64(4_000_000)})
	want := Rescaled{Changed: true, TAT: time.UnixMicro(5_000_000), Now: time.UnixMicro(4_000_000)}
	if err != nil || !got.TAT.Equal(want.TAT) || !got.Now.Equal(want.Now) || !got.Changed {
		t.Errorf("rescaleReply(valid) = %+v, %v; want %+v", got, err, want)
	}
}
