package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/internal/strictjson"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/tenants"
)

// The dead-letter API (package dlq, docs/adr/0014-dead-letters.md), behind
// adminGate as the rest of the admin API:
//
//	GET    /admin/v1/tenants/{id}/dlq            {"tenant", "jobs": [...], "next_cursor"}, newest first;
//	                                             ?limit=N (default dlq.PageDefault, most dlq.PageMax) &cursor=C
//	GET    /admin/v1/tenants/{id}/dlq/{job_id}   one dead letter with its payload and response
//	POST   /admin/v1/tenants/{id}/dlq:redrive    {"job_ids": [...]} or {"all": true} → {"redriven": N, "skipped": [...]}
//	DELETE /admin/v1/tenants/{id}/dlq/{job_id}   {"deleted": 1}; 404 when absent
//	DELETE /admin/v1/tenants/{id}/dlq            {"deleted": N}
//
// A redrive or delete that touched a job is audited (tenants.ActionDLQRedrive,
// ActionDLQDelete, with the count) and counted in
// sluice_dlq_redriven_total{tenant} / sluice_dlq_deleted_total{tenant}.

// dlqMetrics are the dead-letter API's series.
type dlqMetrics struct {
	redriven *prometheus.CounterVec // sluice_dlq_redriven_total{tenant}
	deleted  *prometheus.CounterVec // sluice_dlq_deleted_total{tenant}
}

func newDLQMetrics(reg prometheus.Registerer) (*dlqMetrics, error) {
	m := &dlqMetrics{
		redriven: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_dlq_redriven_total",
			Help: "Dead jobs put back on their tenant's queue by the admin API."}, []string{"tenant"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_dlq_deleted_total",
			Help: "Dead letters deleted by the admin API."}, []string{"tenant"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.redriven, m.deleted} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("ingest: register dlq metrics: %w", err)
			}
		}
	}
	return m, nil
}

// redriveTimeout bounds one redrive request's work.
const redriveTimeout = time.Minute

// Allow lists of the dead-letter paths.
const (
	allowDLQ     = "GET, DELETE"
	allowRedrive = "POST"
)

// dlqRoutes registers the dead-letter API on route (see adminRoutes for
// the shape: one pattern per operation, one per path for its 405).
func (s *Server) dlqRoutes(route func(pattern, name string, h http.HandlerFunc)) {
	const base = "/admin/v1/tenants/{id}/dlq"
	route("GET "+base, "admin", s.adminGate("dlq_list", allowDLQ, s.dlqTenant(s.dlqList)))
	route("DELETE "+base, "admin", s.adminGate("dlq_delete", allowDLQ, s.dlqTenant(s.dlqDeleteAll)))
	route("GET "+base+"/{job_id}", "admin", s.adminGate("dlq_get", allowDLQ, s.dlqTenant(s.dlqGet)))
	route("DELETE "+base+"/{job_id}", "admin", s.adminGate("dlq_delete", allowDLQ, s.dlqTenant(s.dlqDelete)))
	route("POST "+base+":redrive", "admin", s.adminGate("dlq_redrive", allowRedrive, s.dlqTenant(s.dlqRedrive)))
	route(base, "admin", s.adminGate("", allowDLQ, nil))
	route(base+"/{job_id}", "admin", s.adminGate("", allowDLQ, nil))
	route(base+":redrive", "admin", s.adminGate("", allowRedrive, nil))
}

// dlqHandler serves one dead-letter operation on the configured tenant id
// with the store st.
type dlqHandler func(w http.ResponseWriter, r *http.Request, st *dlq.Store, id, who string)

// dlqTenant answers 404 for a tenant that is not configured and was never
// deleted (tenants.Registry.Deleted: a deleted tenant's letters can still
// be listed, read and deleted, though not redriven), else runs h with a
// dlq.Store on ingest's Redis and producer.
func (s *Server) dlqTenant(h dlqHandler) adminHandler {
	return func(w http.ResponseWriter, r *http.Request, id, who string) {
		if _, ok := s.snap.Load().tenants[id]; !ok || !keys.ValidTenant(id) {
			deleted, err := s.registry.Deleted(r.Context(), id)
			switch {
			case err != nil:
				s.adminError(w, id, err)
				return
			case !deleted:
				s.adminError(w, id, tenants.ErrNotFound)
				return
			case r.Method == http.MethodPost:
				writeProblem(w, newProblem(http.StatusConflict, "", fmt.Sprintf(
					"tenant %q is deleted: its letters can be listed and deleted, not redriven; create the tenant again to redrive them", id)))
				return
			}
		}
		st, err := dlq.New(dlq.Config{Redis: s.rdb, Producer: s.producer, Clock: s.clock})
		if err != nil {
			s.adminError(w, id, err)
			return
		}
		h(w, r, st, id, who)
	}
}

func (s *Server) dlqList(w http.ResponseWriter, r *http.Request, st *dlq.Store, id, _ string) {
	q := queryOf(r)
	n, p := q.limit(dlq.PageDefault, dlq.PageMax)
	if p != nil {
		writeProblem(w, p)
		return
	}
	cursor, p := q.get("cursor")
	if p != nil {
		writeProblem(w, p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	page, err := st.List(ctx, id, n, cursor)
	if errors.Is(err, dlq.ErrBadCursor) {
		writeProblem(w, newProblem(http.StatusBadRequest, "cursor", fmt.Sprintf("cursor must be a next_cursor of an earlier page (got %q)", cursor)))
		return
	}
	if err != nil {
		writeProblem(w, s.dlqProblem("dlq list", err))
		return
	}
	out := struct {
		Tenant     string     `json:"tenant"`
		Jobs       []dlq.Item `json:"jobs"`
		NextCursor *string    `json:"next_cursor"`
	}{Tenant: id, Jobs: page.Items}
	if page.Next != "" {
		out.NextCursor = &page.Next
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) dlqGet(w http.ResponseWriter, r *http.Request, st *dlq.Store, id, _ string) {
	job := r.PathValue("job_id")
	if !keys.ValidID(job) {
		writeProblem(w, notFound("dead letter", job))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	l, err := st.Get(ctx, id, job)
	switch {
	case errors.Is(err, dlq.ErrNotFound):
		writeProblem(w, notFound("dead letter", job))
	case err != nil:
		writeProblem(w, s.dlqProblem("dlq get", err))
	default:
		writeJSON(w, http.StatusOK, struct {
			Tenant string `json:"tenant"`
			dlq.Letter
		}{id, l})
	}
}

// redriveRequest is POST …/dlq:redrive's body: job ids, or all.
type redriveRequest struct {
	JobIDs []string `json:"job_ids"`
	All    bool     `json:"all"`
}

// decodeRedrive reads and checks a redrive body: exactly one of job_ids (1
// to dlq.MaxIDs valid ids) and all (true).
func (s *Server) decodeRedrive(w http.ResponseWriter, r *http.Request) (redriveRequest, *problem) {
	var req redriveRequest
	body, p := s.adminBody(w, r, "application/json")
	if p != nil {
		return req, p
	}
	if err := strictjson.Check(body, &req, "json"); err != nil {
		return req, newProblem(http.StatusBadRequest, "", err.Error())
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, newProblem(http.StatusBadRequest, "", "the body must be {\"job_ids\": [...]} or {\"all\": true}")
	}
	switch {
	case req.All && req.JobIDs != nil:
		return req, newProblem(http.StatusUnprocessableEntity, "job_ids", "give job_ids or all, not both")
	case req.All:
		return req, nil
	case len(req.JobIDs) == 0:
		return req, newProblem(http.StatusUnprocessableEntity, "job_ids", "give job_ids (1 to 1000 ids) or \"all\": true")
	case len(req.JobIDs) > dlq.MaxIDs:
		return req, newProblem(http.StatusUnprocessableEntity, "job_ids", fmt.Sprintf("at most %d ids (got %d)", dlq.MaxIDs, len(req.JobIDs)))
	}
	for i, j := range req.JobIDs {
		if !keys.ValidID(j) {
			return req, newProblem(http.StatusUnprocessableEntity, fmt.Sprintf("job_ids[%d]", i), fmt.Sprintf("must be %s (got %q)", keys.IDRule, j))
		}
	}
	return req, nil
}

func (s *Server) dlqRedrive(w http.ResponseWriter, r *http.Request, st *dlq.Store, id, who string) {
	req, p := s.decodeRedrive(w, r)
	if p != nil {
		writeProblem(w, p)
		return
	}
	// A redrive of every dead letter is up to keys.DeadMaxJobs enqueues, in
	// chunks: it gets redriveTimeout, and outlives a client that hangs up
	// (each chunk is enqueued, then removed, never left half done).
	armWrite(w, s.snap.Load(), redriveTimeout)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), redriveTimeout)
	defer cancel()
	var res dlq.Result
	var err error
	if req.All {
		res, err = st.RedriveAll(ctx, id)
	} else {
		res, err = st.Redrive(ctx, id, req.JobIDs)
	}
	s.dlqAudit(ctx, id, who, tenants.ActionDLQRedrive, res.Redriven)
	if err != nil {
		p := s.dlqProblem("dlq redrive", err)
		if errors.Is(err, queue.ErrInvalidJob) || errors.Is(err, queue.ErrUnavailable) {
			p = enqueueProblem(s.snap.Load(), id, err)
		}
		if res.Redriven > 0 {
			p.Detail += fmt.Sprintf(" (%d were redriven before the error; the rest stay in the DLQ)", res.Redriven)
		}
		writeProblem(w, p)
		return
	}
	if res.Skipped == nil {
		res.Skipped = []dlq.Skip{}
	}
	writeJSON(w, http.StatusOK, struct {
		Redriven int        `json:"redriven"`
		Skipped  []dlq.Skip `json:"skipped"`
	}{res.Redriven, res.Skipped})
}

func (s *Server) dlqDelete(w http.ResponseWriter, r *http.Request, st *dlq.Store, id, who string) {
	job := r.PathValue("job_id")
	if !keys.ValidID(job) {
		writeProblem(w, notFound("dead letter", job))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	n, err := st.Delete(ctx, id, []string{job})
	s.answerDeleted(ctx, w, id, who, n, err, notFound("dead letter", job))
}

func (s *Server) dlqDeleteAll(w http.ResponseWriter, r *http.Request, st *dlq.Store, id, who string) {
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	n, err := st.DeleteAll(ctx, id)
	s.answerDeleted(ctx, w, id, who, n, err, nil)
}

// answerDeleted audits and answers a delete of n dead letters: {"deleted":
// n}, or absent (when not nil) for none.
func (s *Server) answerDeleted(ctx context.Context, w http.ResponseWriter, id, who string, n int, err error, absent *problem) {
	s.dlqAudit(ctx, id, who, tenants.ActionDLQDelete, n)
	switch {
	case err != nil:
		writeProblem(w, s.dlqProblem("dlq delete", err))
	case n == 0 && absent != nil:
		writeProblem(w, absent)
	default:
		writeJSON(w, http.StatusOK, struct {
			Deleted int `json:"deleted"`
		}{n})
	}
}

// dlqAudit counts and audits an operation that touched n dead letters of
// tenant id (nothing when n is 0). An audit failure is logged: the
// operation is done.
func (s *Server) dlqAudit(ctx context.Context, id, who, action string, n int) {
	if n == 0 {
		return
	}
	c := s.dlqMetrics.deleted
	if action == tenants.ActionDLQRedrive {
		c = s.dlqMetrics.redriven
	}
	c.WithLabelValues(id).Add(float64(n))
	if err := s.registry.Note(context.WithoutCancel(ctx), id, who, s.clock.Now(), action, int64(n)); err != nil {
		s.log.Error("ingest: dead-letter operation done but not audited", "tenant", id, "action", action, "count", n, "err", err)
	}
}

// dlqProblem is the 503 of a dead-letter request whose Redis work failed.
func (s *Server) dlqProblem(op string, err error) *problem {
	s.log.Warn("ingest: dead-letter request", "op", op, "err", err)
	p := newProblem(http.StatusServiceUnavailable, "", "dead letters cannot be read or written (redis); retry later")
	p.Backend, p.RetryAfter = "redis", retryAfterSeconds(s.snap.Load().retryAfter)
	return p
}
