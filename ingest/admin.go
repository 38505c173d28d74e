package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
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
	purged   *prometheus.CounterVec // sluice_jobs_purged_total{tenant}
}

func newAdminMetrics(reg prometheus.Registerer) (*adminMetrics, error) {
	m := &adminMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_admin_requests_total",
		Help: "Admin API requests by action (list, get, put, patch, delete, audit, purge, none when unauthorized or unrouted) and status code.",
	}, []string{"action", "code"}), purged: newPurgedCounter()}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.purged} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("ingest: register admin metrics: %w", err)
			}
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

// adminHandler serves one admin operation on tenant id (r.PathValue("id"),
// "" for the list) for the admin called who.
type adminHandler func(w http.ResponseWriter, r *http.Request, id, who string)

// Allow lists of the admin paths, for their 405 answers.
const (
	allowGet    = "GET"
	allowTenant = "GET, PUT, PATCH, DELETE"
)

// adminRoutes registers the admin API on route: one ServeMux pattern per
// operation; on each of its paths a pattern without a method that answers
// every other method 405 with Allow (ServeMux's own 405 is text/plain); and
// the /admin/ subtree, which answers any other path 404 as problem+json.
func (s *Server) adminRoutes(route func(pattern, name string, h http.HandlerFunc)) {
	route("GET /admin/v1/tenants", "admin", s.adminGate("list", allowGet, s.adminList))
	route("GET /admin/v1/tenants/{id}", "admin", s.adminGate("get", allowTenant, s.adminGet))
	route("PUT /admin/v1/tenants/{id}", "admin", s.adminGate("put", allowTenant, s.adminPut))
	route("PATCH /admin/v1/tenants/{id}", "admin", s.adminGate("patch", allowTenant, s.adminPatch))
	route("DELETE /admin/v1/tenants/{id}", "admin", s.adminGate("delete", allowTenant, s.adminDelete))
	route("GET /admin/v1/tenants/{id}/audit", "admin", s.adminGate("audit", allowGet, s.adminAudit))
	s.purgeRoutes(route)
	route("/admin/v1/tenants", "admin", s.adminGate("", allowGet, nil))
	route("/admin/v1/tenants/{id}", "admin", s.adminGate("", allowTenant, nil))
	route("/admin/v1/tenants/{id}/audit", "admin", s.adminGate("", allowGet, nil))
	route("/admin/", "admin", s.adminGate("", "", nil))
}

// adminGate wraps the handler h of one admin pattern, whose path allows the
// methods allow. Before h runs, in this order, it answers 404 (as an unknown
// route) when the admin API is off (no registry or no admin tokens), 401
// when the admin token is missing or unknown, 404 for an id holding an
// escaped "/" (a path of more segments than the pattern's), and, when h is
// nil or the method is HEAD (which ServeMux lets a GET pattern take), 405
// with Allow, or 404 when allow is "". Every answer is no-store, gets
// adminTimeout more to be written, and is counted in
// sluice_admin_requests_total{action,code}: action for h's answers, "none"
// for the gate's own.
func (s *Server) adminGate(action, allow string, h adminHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		label := "none"
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if sw.code == 0 {
				sw.code = http.StatusOK
			}
			s.admin.requests.WithLabelValues(label, strconv.Itoa(sw.code)).Inc()
		}()
		w = sw
		// An admin answer (every tenant, an audit page) may be large and comes
		// after Redis work bounded by adminTimeout: it gets that much more time.
		armWrite(w, s.snap.Load(), adminTimeout)
		w.Header().Set("Cache-Control", "no-store")
		admins := s.admins.Load()
		if s.registry == nil || admins == nil || len(*admins) == 0 {
			noRoute(w, r)
			return
		}
		who, ok := adminName(r, *admins)
		if !ok {
			writeProblem(w, newProblem(http.StatusUnauthorized, "Authorization",
				"missing, repeated or unknown admin token; send one Authorization: Bearer <admin token>"))
			return
		}
		id := r.PathValue("id")
		switch {
		case strings.Contains(id, "/") || allow == "":
			noRoute(w, r)
		case h == nil || r.Method == http.MethodHead:
			w.Header().Set("Allow", allow)
			writeProblem(w, newProblem(http.StatusMethodNotAllowed, "", r.Method+" is not allowed here; use "+allow))
		default:
			label = action
			h(w, r, id, who)
		}
	}
}

// noRoute answers 404 naming the method and path, as every unknown route.
func noRoute(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, newProblem(http.StatusNotFound, "", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
}

// adminName maps "Authorization: Bearer <token>" to the admin's name.
func adminName(r *http.Request, admins adminIndex) (string, bool) {
	token, ok := bearer(r)
	if !ok {
		return "", false
	}
	name, found := admins[sha256.Sum256([]byte(token))]
	return name, found
}
