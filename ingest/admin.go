package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/tenants"
)

// The admin API (docs/adr/0008-runtime-tenants.md), on ingest's listener:
//
//	GET    /admin/v1/tenants             every tenant: {"tenants": [{id, source, spec, version}]}
//	GET    /admin/v1/tenants/{id}        one tenant: {id, source, spec, version}
//	PUT    /admin/v1/tenants/{id}        body = spec; 201 created, 200 replaced
//	PATCH  /admin/v1/tenants/{id}        body = JSON merge patch (RFC 7396) of the spec; 200
//	DELETE /admin/v1/tenants/{id}        204
//	GET    /admin/v1/tenants/{id}/audit  {"entries": [...], "next_cursor": "…"|null}, newest first;
//	                                     ?limit=N (default and most tenants.AuditPageMax = 100) &cursor=C
//
// Every request carries "Authorization: Bearer <admin token>"; the token's
// SHA-256 is looked up among ingest.admin_tokens, whose name is the "who" of
// the audit entry. A missing or unknown token — a tenant's API key included
// — is a 401 that does not say which. With no admin tokens configured (or no
// registry), every /admin/ path answers 404, as an unknown route does.

// adminTimeout bounds the Redis work of one admin request.
const adminTimeout = 5 * time.Second

// Audit page size: a larger limit is a 400 naming it, as every bad query
// parameter is.
const (
	auditDefault = tenants.AuditPageMax
	auditMax     = tenants.AuditPageMax
)

// adminMetrics are the admin API's series.
type adminMetrics struct {
	requests *prometheus.CounterVec // sluice_admin_requests_total{action,code}
}

func newAdminMetrics(reg prometheus.Registerer) (*adminMetrics, error) {
	m := &adminMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_admin_requests_total",
		Help: "Admin API requests by action (list, get, put, patch, delete, audit, none when unauthorized or unrouted) and status code.",
	}, []string{"action", "code"})}
	if reg != nil {
		if err := reg.Register(m.requests); err != nil {
			return nil, fmt.Errorf("ingest: register admin metrics: %w", err)
		}
	}
	return m, nil
}

// adminIndex maps the SHA-256 of each admin token to its name.
type adminIndex map[[sha256.Size]byte]string

// newAdminIndex indexes cfg.Ingest.AdminTokens ("sha256:<hex>" values;
// config.Validate rejects others, which are skipped here).
func newAdminIndex(cfg *config.Config) adminIndex {
	idx := adminIndex{}
	for name, h := range cfg.Ingest.AdminTokens {
		hexPart, ok := strings.CutPrefix(strings.ToLower(h), "sha256:")
		if !ok {
			continue
		}
		raw, err := hex.DecodeString(hexPart)
		if err != nil || len(raw) != sha256.Size {
			continue
		}
		idx[[sha256.Size]byte(raw)] = name
	}
	return idx
}

// adminTenant is one tenant in an admin answer.
type adminTenant struct {
	ID      string          `json:"id"`
	Source  string          `json:"source"`
	Spec    json.RawMessage `json:"spec"`
	Version int64           `json:"version"`
}

// handleAdmin serves every /admin/ path.
func (s *Server) handleAdmin(w http.ResponseWriter, r *http.Request) {
	action := "none"
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		s.admin.requests.WithLabelValues(action, strconv.Itoa(sw.code)).Inc()
	}()
	w = sw
	// An admin answer (every tenant, an audit page) may be large and comes
	// after Redis work bounded by adminTimeout: it gets that much more time.
	armWrite(w, s.snap.Load(), adminTimeout)
	w.Header().Set("Cache-Control", "no-store")
	admins := s.admins.Load()
	if s.registry == nil || admins == nil || len(*admins) == 0 {
		writeProblem(w, newProblem(http.StatusNotFound, "", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
		return
	}
	who, ok := adminName(r, *admins)
	if !ok {
		writeProblem(w, newProblem(http.StatusUnauthorized, "Authorization",
			"missing or unknown admin token; send Authorization: Bearer <admin token>"))
		return
	}
	id, route := adminRoute(r.URL.Path)
	handlers := map[string]map[string]func(http.ResponseWriter, *http.Request, string, string){
		"list":   {http.MethodGet: s.adminList},
		"tenant": {http.MethodGet: s.adminGet, http.MethodPut: s.adminPut, http.MethodPatch: s.adminPatch, http.MethodDelete: s.adminDelete},
		"audit":  {http.MethodGet: s.adminAudit},
	}[route]
	if handlers == nil {
		writeProblem(w, newProblem(http.StatusNotFound, "", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
		return
	}
	h, ok := handlers[r.Method]
	if !ok {
		allow := "GET"
		if route == "tenant" {
			allow = "GET, PUT, PATCH, DELETE"
		}
		w.Header().Set("Allow", allow)
		writeProblem(w, newProblem(http.StatusMethodNotAllowed, "", r.Method+" is not allowed here; use "+allow))
		return
	}
	action = strings.ToLower(r.Method)
	if route != "tenant" {
		action = route
	}
	h(w, r, id, who)
}

// adminRoute parses an admin path: "list" for /admin/v1/tenants, "tenant"
// for /admin/v1/tenants/{id}, "audit" for /admin/v1/tenants/{id}/audit,
// "" for anything else.
func adminRoute(path string) (id, route string) {
	rest, ok := strings.CutPrefix(path, "/admin/v1/tenants")
	switch {
	case !ok:
		return "", ""
	case rest == "":
		return "", "list"
	case !strings.HasPrefix(rest, "/"):
		return "", ""
	}
	parts := strings.Split(rest[1:], "/")
	switch {
	case parts[0] == "":
		return "", ""
	case len(parts) == 1:
		return parts[0], "tenant"
	case len(parts) == 2 && parts[1] == "audit":
		return parts[0], "audit"
	}
	return "", ""
}

// adminName maps "Authorization: Bearer <token>" to the admin's name.
func adminName(r *http.Request, admins adminIndex) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	name, found := admins[sha256.Sum256([]byte(token))]
	return name, found
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
	res, err := s.registry.Put(ctx, id, spec, who, s.now())
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
	res, err := s.registry.Patch(ctx, id, body, who, s.now())
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
	if _, err := s.registry.Delete(ctx, id, who, s.now()); err != nil {
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
	n := auditDefault
	if q := r.URL.Query().Get("limit"); q != "" {
		v, err := strconv.Atoi(q)
		if err != nil || v < 1 || v > auditMax {
			writeProblem(w, newProblem(http.StatusBadRequest, "limit", fmt.Sprintf("limit must be an integer from 1 to %d (got %q)", auditMax, q)))
			return
		}
		n = v
	}
	var before int64 // the cursor: a version; the page holds the entries below it
	if q := r.URL.Query().Get("cursor"); q != "" {
		v, err := strconv.ParseInt(q, 10, 64)
		if err != nil || v < 1 {
			writeProblem(w, newProblem(http.StatusBadRequest, "cursor", fmt.Sprintf("cursor must be a next_cursor of an earlier page (got %q)", q)))
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

// rescaleGCRA carries the stored state of each gcra policy whose rate a
// write changed over to the new rate (limits.RescaleGCRA), so an upgraded
// tenant is not held back by a debt computed under the old plan. The write
// is already stored; a failure is logged and leaves the old debt, which
// drains at the new rate.
func (s *Server) rescaleGCRA(ctx context.Context, id string, res tenants.Result) {
	if res.Old == nil {
		return
	}
	var now time.Time // zero: Redis TIME, as the admission scripts use
	if s.clock != nil {
		now = s.clock.Now()
	}
	for name, pair := range gcraChanges(*res.Old, res.Spec) {
		if _, err := limits.RescaleGCRA(ctx, s.rdb, id, pair[0], pair[1], now); err != nil {
			s.log.Warn("ingest: rescale gcra state after a limit change", "tenant", id, "policy", name, "err", err)
		}
	}
}

// gcraChanges returns, by policy name, the old and new policy of every gcra
// policy of the tenant ("tenant", "type.<type>") that is gcra before and
// after and whose limit or period changed.
func gcraChanges(old, cur config.Tenant) map[string][2]limits.Policy {
	out := map[string][2]limits.Policy{}
	pair := func(name string, a, b config.Admission) {
		po, ok1 := a.Policy(name)
		pn, ok2 := b.Policy(name)
		if ok1 && ok2 && po.Algorithm == limits.AlgGCRA && pn.Algorithm == limits.AlgGCRA &&
			(po.Limit != pn.Limit || po.Period != pn.Period) {
			out[name] = [2]limits.Policy{po, pn}
		}
	}
	pair("tenant", old.Admission, cur.Admission)
	for typ, jt := range cur.JobTypes {
		if prev, ok := old.JobTypes[typ]; ok {
			pair("type."+typ, prev.Admission, jt.Admission)
		}
	}
	return out
}
