package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/tenants"
)

// adminTenant is one tenant in an admin answer.
type adminTenant struct {
	ID      string          `json:"id"`
	Source  string          `json:"source"`
	Spec    json.RawMessage `json:"spec"`
	Version int64           `json:"version"`
}

func (s *Server) adminList(w http.ResponseWriter, r *http.Request, _, _ string) {
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	views, err := s.registry.List(ctx)
	if err != nil {
		s.adminError(w, "", err)
		return
	}
	out := struct {
		Tenants []adminTenant `json:"tenants"`
	}{Tenants: make([]adminTenant, 0, len(views))}
	for _, v := range views {
		t, err := tenantAnswer(v)
		if err != nil {
			s.adminError(w, v.ID, err)
			return
		}
		out.Tenants = append(out.Tenants, t)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) adminGet(w http.ResponseWriter, r *http.Request, id, _ string) {
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	v, err := s.registry.Get(ctx, id)
	if err != nil {
		s.adminError(w, id, err)
		return
	}
	s.writeTenant(w, http.StatusOK, v)
}

func (s *Server) adminPut(w http.ResponseWriter, r *http.Request, id, who string) {
	if !keys.ValidTenant(id) {
		writeProblem(w, newProblem(http.StatusUnprocessableEntity, "id", fmt.Sprintf("tenant id must be %s (got %q)", keys.TenantRule, id)))
		return
	}
	body, p := s.adminBody(w, r, "application/json")
	if p != nil {
		writeProblem(w, p)
		return
	}
	spec, err := tenants.DecodeSpec(id, body)
	if err != nil {
		s.adminError(w, id, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	res, err := s.registry.Put(ctx, id, spec, who, s.clock.Now())
	if err != nil {
		s.adminError(w, id, err)
		return
	}
	s.rescaleGCRA(ctx, id, res)
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
		w.Header().Set("Location", "/admin/v1/tenants/"+id)
	}
	s.writeTenant(w, status, res.View)
}

func (s *Server) adminPatch(w http.ResponseWriter, r *http.Request, id, who string) {
	if !keys.ValidTenant(id) {
		s.adminError(w, id, tenants.ErrNotFound)
		return
	}
	body, p := s.adminBody(w, r, "application/merge-patch+json", "application/json")
	if p != nil {
		writeProblem(w, p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	res, err := s.registry.Patch(ctx, id, body, who, s.clock.Now())
	if err != nil {
		s.adminError(w, id, err)
		return
	}
	s.rescaleGCRA(ctx, id, res)
	s.writeTenant(w, http.StatusOK, res.View)
}

func (s *Server) adminDelete(w http.ResponseWriter, r *http.Request, id, who string) {
	if !keys.ValidTenant(id) {
		s.adminError(w, id, tenants.ErrNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	if _, err := s.registry.Delete(ctx, id, who, s.clock.Now()); err != nil {
		s.adminError(w, id, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) adminAudit(w http.ResponseWriter, r *http.Request, id, _ string) {
	if !keys.ValidTenant(id) {
		s.adminError(w, id, tenants.ErrNotFound)
		return
	}
	q := queryOf(r)
	n, p := q.limit(auditDefault, auditMax)
	if p != nil {
		writeProblem(w, p)
		return
	}
	var before int64 // the cursor: a version; the page holds the entries below it
	c, p := q.get("cursor")
	if p != nil {
		writeProblem(w, p)
		return
	}
	if c != "" {
		v, err := strconv.ParseInt(c, 10, 64)
		if err != nil || v < 1 {
			writeProblem(w, newProblem(http.StatusBadRequest, "cursor", fmt.Sprintf("cursor must be a next_cursor of an earlier page (got %q)", c)))
			return
		}
		before = v
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	page, err := s.registry.Store().Audit(ctx, id, before, n)
	if err != nil {
		s.adminError(w, id, err)
		return
	}
	out := struct {
		Entries    []tenants.AuditEntry `json:"entries"`
		NextCursor *string              `json:"next_cursor"`
	}{Entries: page.Entries}
	if page.Next > 0 {
		c := strconv.FormatInt(page.Next, 10)
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
}

// adminBody checks the Content-Type against types (checkContentType) and reads the body under
// the bounds of job bodies (body.go: ingest.max_body_bytes, body_timeout);
// it must be JSON (400 otherwise). Its field names are checked strictly by
// tenants.DecodeSpec and ApplyPatch.
func (s *Server) adminBody(w http.ResponseWriter, r *http.Request, types ...string) ([]byte, *problem) {
	snap := s.snap.Load()
	armBody(w, snap, adminTimeout)
	if p := checkContentType(r, types...); p != nil {
		return nil, p
	}
	if p := checkBodyHeaders(w, r, snap.maxBody); p != nil {
		return nil, p
	}
	body, p := readBody(w, r, snap.maxBody)
	armWrite(w, snap, adminTimeout)
	switch {
	case p != nil:
		s.logBodyError(r, "", p)
		return nil, p
	case !json.Valid(body):
		return nil, newProblem(http.StatusBadRequest, "", "the body is not valid JSON")
	}
	return body, nil
}

// adminError answers err: 404 for an unknown tenant, 422 naming the first
// field for an invalid spec, 409 for a write that kept losing races, 503
// (Retry-After) when Redis cannot be reached.
func (s *Server) adminError(w http.ResponseWriter, id string, err error) {
	if se, ok := tenants.IsSpecError(err); ok {
		p := newProblem(http.StatusUnprocessableEntity, se.Problems[0].Field, se.Error())
		p.Tenant = id
		writeProblem(w, p)
		return
	}
	switch {
	case errors.Is(err, tenants.ErrNotFound):
		writeProblem(w, newProblem(http.StatusNotFound, "", fmt.Sprintf("no tenant %q", id)))
	case errors.Is(err, tenants.ErrConflict):
		writeProblem(w, newProblem(http.StatusConflict, "", fmt.Sprintf("tenant %q kept changing during the request; retry", id)))
	default:
		s.log.Error("ingest: admin request", "tenant", id, "err", err)
		p := newProblem(http.StatusServiceUnavailable, "", "the tenant store cannot be reached; retry later")
		p.Backend, p.RetryAfter = "redis", retryAfterSeconds(s.snap.Load().retryAfter)
		writeProblem(w, p)
	}
}

// writeTenant answers one tenant.
func (s *Server) writeTenant(w http.ResponseWriter, status int, v tenants.View) {
	t, err := tenantAnswer(v)
	if err != nil {
		s.adminError(w, v.ID, err)
		return
	}
	writeJSON(w, status, t)
}

func tenantAnswer(v tenants.View) (adminTenant, error) {
	spec, err := tenants.EncodeSpec(v.Spec)
	if err != nil {
		return adminTenant{}, err
	}
	return adminTenant{ID: v.ID, Source: v.Source, Spec: spec, Version: v.Version}, nil
}
