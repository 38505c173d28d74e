package drainer

import (
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/quietlog"
)

// failLogEvery is how often a tenant's failed deliveries are logged at
// most: one line, then the others of that interval are counted into the
// next line's "suppressed".
const failLogEvery = 10 * time.Second

// failLog logs failed delivery attempts (retried, deferred by a
// Retry-After, or dead-lettered), at most one line per tenant per
// failLogEvery (package quietlog), so that a target that fails every
// request says why in the log without flooding it. The metrics
// (sluice_dispatch_total, sluice_retries_total) count every failure; the
// job's state keeps its last error.
type failLog struct{ q *quietlog.Log }

func newFailLog(log *slog.Logger, c clock.Clock) *failLog {
	return &failLog{q: quietlog.New(log, c, failLogEvery)}
}

// failed records one failed attempt of job id of tenant (attempt: the
// Sluice-Attempt it was sent with; outcome: retry, retry_after or dead)
// and logs it unless the tenant had a line within failLogEvery.
func (f *failLog) failed(tenant, id string, attempt int, outcome string, err error) {
	f.q.Warn(tenant, "drainer: delivery failed", "tenant", tenant, "job_id", id, "attempt", attempt,
		"outcome", outcome, "err", err)
}
