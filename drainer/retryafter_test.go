package drainer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
)

// TestRetryAfterZeroHasAFloor: a downstream answering 503 with Retry-After
// 0 or a date in the past, every time, gets the job again no sooner than
// drainer.backoff_base later: such answers spend no attempt, so without a
// floor the drainer resent the job in a tight loop (95 sends in 20 s in a
// probe), never dead-lettering it.
func TestRetryAfterZeroHasAFloor(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "ra0")
	s := newSink(t, func(d delivery, n int) (int, string) {
		if strings.HasSuffix(d.id, "past") {
			return 503, "Wed, 21 Oct 2015 07:28:00 GMT"
		}
		return 503, "0"
	})
	push(t, rdb, queue.Envelope{ID: tenant + "-zero", Tenant: tenant}, queue.Envelope{ID: tenant + "-past", Tenant: tenant})
	cfg := settings()
	cfg.BackoffBase, cfg.BackoffMax = 250*time.Millisecond, time.Second
	off := false
	stop := run(t, drainer.Config{Redis: rdb, Settings: cfg, Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Adaptive: &off})}})
	time.Sleep(1200 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{tenant + "-zero", tenant + "-past"} {
		var at []time.Time
		for _, d := range s.deliveries() {
			if d.id == id {
				at = append(at, d.at)
			}
		}
		if len(at) < 2 || len(at) > 6 {
			t.Errorf("%s: %d sends in 1.2 s, want 2 to 6 (one per backoff_base 250ms at most)", id, len(at))
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < 200*time.Millisecond {
				t.Errorf("%s: send %d came %v after the one before, want >= backoff_base", id, i+1, gap)
			}
		}
	}
}
