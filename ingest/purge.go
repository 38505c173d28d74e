package ingest

import (
	"cmp"
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/tenants"
)

// The purge, an admin route (admin.go's gate and audit):
//
//	POST /admin/v1/tenants/{id}/queue:purge   {"purged": N}
//
// Every waiting job of the tenant (queued, or retrying: waiting for its
// retry) becomes cancelled with reason purged and is never delivered, their
// cost leaves the backlog counter, sluice_jobs_purged_total{tenant} rises by N and
// the audit records the purge (an entry of action purge with count N, Registry.Note).
// Jobs in flight finish as they would; scheduled jobs (not yet due) stay.
// jobstate.Purge has the steps on each queue backend.

// allowPurge is the Allow list of the purge path.
const allowPurge = "POST"

// purgeRoutes registers the purge on route.
func (s *Server) purgeRoutes(route func(pattern, name string, h http.HandlerFunc)) {
	route("POST /admin/v1/tenants/{id}/queue:purge", "admin", s.adminGate("purge", allowPurge, s.adminPurge))
	route("/admin/v1/tenants/{id}/queue:purge", "admin", s.adminGate("", allowPurge, nil))
}

// newPurgedCounter is sluice_jobs_purged_total{tenant}.
func newPurgedCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_jobs_purged_total",
		Help: "Jobs cancelled by a purge of their tenant's queue (POST /admin/v1/tenants/{id}/queue:purge).",
	}, []string{"tenant"})
}

// purgeAnswer is the answer of a purge.
type purgeAnswer struct {
	Purged int64 `json:"purged"`
}

// adminPurge purges tenant id's queue, of a deleted tenant too
// (tenants.Registry.Deleted). A tenant that never existed is a 404; a Redis failure midway is a 503 (the jobs purged so far stay purged,
// counted and audited; a retry purges the rest). An audit write that fails
// after the purge is logged, and the answer is still the count.
func (s *Server) adminPurge(w http.ResponseWriter, r *http.Request, id, who string) {
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	if ok, err := s.registry.Reachable(ctx, id); err != nil || !ok {
		s.adminError(w, id, cmp.Or(err, tenants.ErrNotFound))
		return
	}
	n, err := jobstate.Purge(ctx, s.rdb, id)
	if n > 0 || err == nil {
		s.admin.purged.WithLabelValues(id).Add(float64(n))
		if aerr := s.registry.RecordPurge(ctx, id, n, who, s.clock.Now()); aerr != nil {
			s.log.Error("ingest: purge not recorded in the audit", "tenant", id, "purged", n, "err", aerr)
		}
	}
	if err != nil {
		s.adminError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, purgeAnswer{Purged: n})
}
