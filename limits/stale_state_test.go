package limits

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestStaleStateOfAnotherPolicyNeverWedges: a policy's state key outlives an
// admin change of its period or algorithm. Found by the edges probe: gcra
// 10 per 8784h with burst 1 admitted one job (TAT a year ahead, shortened
// to 36 days by the wait), the tenant switched to fixed_window and back to
// gcra 10 per 1s, and every request was refused with Retry-After 3,162,238 s.
// State no commit of the current policy could leave (a GCRA TAT more than
// the burst tolerance ahead, a sliding window more than one window ahead) is
// another policy's and is forgotten, as a new tenant's would be: the tenant
// is admitted, and from then on limited by the current policy alone.
func TestStaleStateOfAnotherPolicyNeverWedges(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	now := admAt(0)
	nowUS := now.UnixMicro()
	for _, mode := range admModes {
		t.Run(mode.name, func(t *testing.T) {
			a := admNew(t, rdb, mode.cfg)
			t.Run("gcra TAT 36 days ahead", func(t *testing.T) {
				tenant := admTenant(t, rdb)
				p := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 10, Period: time.Second, Burst: 1}
				stale := nowUS + (36 * 24 * time.Hour).Microseconds()
				rdb.Set(ctx, keys.Admission(tenant, string(AlgGCRA), p.Name), stale, 37*24*time.Hour)
				if r := admOne(t, a, tenant, p, 1, now); !r.Allowed {
					t.Fatalf("first request = %+v; want allowed (the stale TAT forgotten)", r)
				}
				r := admOne(t, a, tenant, p, 1, now)
				if r.Allowed || r.RetryAfter != 100*time.Millisecond {
					t.Errorf("second request = %+v; want refused for 100ms (burst 1 at 10/s)", r)
				}
			})
			t.Run("sliding_window of a shorter period", func(t *testing.T) {
				tenant := admTenant(t, rdb)
				// The state of sliding_window 10 per 1s, full in its window;
				// the period is then lengthened to 1h.
				p := Policy{Name: "tenant", Algorithm: AlgSlidingWindow, Limit: 10, Period: time.Hour}
				key := keys.Admission(tenant, string(AlgSlidingWindow), p.Name)
				rdb.HSet(ctx, key, "w", strconv.FormatInt(nowUS/1_000_000, 10), "c", "10", "p", "0")
				rdb.PExpire(ctx, key, time.Minute)
				if r := admOne(t, a, tenant, p, 10, now); !r.Allowed {
					t.Fatalf("10 units = %+v; want allowed (the stale windows forgotten)", r)
				}
				r := admOne(t, a, tenant, p, 1, now)
				if r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > 2*time.Hour {
					t.Errorf("11th unit = %+v; want refused with a wait in (0, 2h] (two of its own windows)", r)
				}
			})
		})
	}
}
