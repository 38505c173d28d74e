package drainer

import (
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// failLogEvery is how often a tenant's failed deliveries are logged at
// most: one line, then the others of that interval are counted into the
// next line's "suppressed".
const failLogEvery = 10 * time.Second

// failLogPrune is the number of tenants remembered above which a new one
// first drops those whose window has passed with nothing left out, so the
// map stays bounded by the tenants failing within one window (plus those
// with a count to report), whatever tenants come and go.
const failLogPrune = 1024

// failLog logs failed delivery attempts (retried, deferred by a
// Retry-After, or dead-lettered), at most one line per tenant per
// failLogEvery, so that a target that fails every request says why in the
// log without flooding it. The metrics (sluice_dispatch_total,
// sluice_retries_total) count every failure; the job's state keeps its
// last error. Safe for concurrent use. A count left out is reported with
// the tenant's next failure; a tenant that stops failing never reports it
// (the metrics have it).
type failLog struct {
	log   *slog.Logger
	clock clock.Clock
	mu    sync.Mutex
	by    map[string]*failSeen
}

type failSeen struct {
	last       time.Time // when the tenant's last line was logged
	suppressed int       // failures since then not logged
}

func newFailLog(log *slog.Logger, c clock.Clock) *failLog {
	return &failLog{log: log, clock: clock.Or(c), by: map[string]*failSeen{}}
}

// failed records one failed attempt of job id of tenant (attempt: the
// Sluice-Attempt it was sent with; outcome: retry, retry_after or dead)
// and logs it unless the tenant had a line within failLogEvery.
func (f *failLog) failed(tenant, id string, attempt int, outcome string, err error) {
	now := f.clock.Now()
	f.mu.Lock()
	s := f.by[tenant]
	if s == nil {
		if len(f.by) >= failLogPrune {
			f.prune(now)
		}
		s = &failSeen{}
		f.by[tenant] = s
	}
	if !s.last.IsZero() && now.Sub(s.last) < failLogEvery {
		s.suppressed++
		f.mu.Unlock()
		return
	}
	suppressed := s.suppressed
	s.last, s.suppressed = now, 0
	f.mu.Unlock()
	f.log.Warn("drainer: delivery failed", "tenant", tenant, "job_id", id, "attempt", attempt,
		"outcome", outcome, "err", err, "suppressed", suppressed, "suppressed_window", failLogEvery.String())
}

// prune drops the tenants whose window ended before now with nothing left
// out. Called with f.mu held.
func (f *failLog) prune(now time.Time) {
	for t, s := range f.by {
		if s.suppressed == 0 && now.Sub(s.last) >= failLogEvery {
			delete(f.by, t)
		}
	}
}
