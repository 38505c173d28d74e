package ingest

import (
	"context"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/ingest/ui"
	"github.com/sluicehq/sluice/internal/depth"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// The web console (package ui), on ingest's listener:
//
//	GET /ui/                            the console's page and its files (no auth)
//	GET /admin/v1/overview              {"tenants": [the stats object of every configured tenant]}
//	GET /admin/v1/tenants/{id}/history  {"tenant", "step_seconds": 5, "points": [{"t", "backlog", "outflow"}]}
//
// The two admin routes take an admin token as the rest of the admin API
// (adminGate). The page sends it only in the Authorization header of its
// fetch calls; no URL carries it, and ingest logs no request header.

// consoleCSP is the console's Content-Security-Policy: its own files only
// (no inline script or style, no other origin, no framing).
const consoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// uiRoutes registers the console's routes on route.
func (s *Server) uiRoutes(route func(pattern, name string, h http.HandlerFunc)) {
	files := ui.Files()
	route("GET /ui/", "ui", func(w http.ResponseWriter, r *http.Request) { serveConsole(w, r, files) })
	route("/ui/", "ui", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET")
		writeProblem(w, newProblem(http.StatusMethodNotAllowed, "", r.Method+" is not allowed here; use GET"))
	})
	route("GET /admin/v1/overview", "admin", s.adminGate("overview", allowGet, s.adminOverview))
	route("/admin/v1/overview", "admin", s.adminGate("", allowGet, nil))
	route("GET /admin/v1/tenants/{id}/history", "admin", s.adminGate("history", allowGet, s.adminHistory))
	route("/admin/v1/tenants/{id}/history", "admin", s.adminGate("", allowGet, nil))
}

// serveConsole answers one file of the console: /ui/ is index.html; an
// unknown name is a 404. Every answer carries consoleCSP and nosniff; the
// HTML is no-store, the other files are revalidated (no-cache).
func serveConsole(w http.ResponseWriter, r *http.Request, files fs.FS) {
	h := w.Header()
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	name := strings.TrimPrefix(r.URL.Path, "/ui/")
	if name == "" {
		name = "index.html"
	}
	b, err := fs.ReadFile(files, name)
	if err != nil || strings.Contains(name, "/") {
		noRoute(w, r)
		return
	}
	if ext := path.Ext(name); ext == ".html" {
		h.Set("Cache-Control", "no-store")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// overviewAnswer is the answer of GET /admin/v1/overview.
type overviewAnswer struct {
	// Tenants holds the stats of every configured tenant, by id.
	Tenants []statsAnswer `json:"tenants"`
}

// adminOverview serves GET /admin/v1/overview: every configured tenant's
// stats, as GET /v1/tenants/{id}/stats answers them, sorted by id, read in
// one round trip (the tenants' tenant_stats.lua calls pipelined).
func (s *Server) adminOverview(w http.ResponseWriter, r *http.Request, _, _ string) {
	snap := s.snap.Load()
	ids := make([]string, 0, len(snap.tenants))
	for t := range snap.tenants {
		if keys.ValidTenant(t) {
			ids = append(ids, t)
		}
	}
	slices.Sort(ids)
	calls := make([]lua.Call, 0, 2*len(ids))
	for _, t := range ids {
		calls = append(calls, statsCalls(t)...)
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	out := overviewAnswer{Tenants: make([]statsAnswer, 0, len(ids))}
	if len(calls) > 0 {
		cmds := lua.Exec(ctx, s.rdb, calls, nil)
		for i, t := range ids {
			st, err := statsFromReplies(snap, t, cmds[2*i], cmds[2*i+1])
			if err != nil {
				writeProblem(w, s.redisProblem(snap, "overview", err))
				return
			}
			out.Tenants = append(out.Tenants, st)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// historyAnswer is the answer of GET /admin/v1/tenants/{id}/history.
type historyAnswer struct {
	Tenant string `json:"tenant"`
	// StepSeconds is the length of one slot (keys.HistoryStep).
	StepSeconds int64 `json:"step_seconds"`
	// Points are the sampled slots of the last 15 minutes
	// (keys.HistorySpan), oldest first; a slot no ingest or drainer sampled
	// is absent.
	Points []depth.Point `json:"points"`
}

// adminHistory serves GET /admin/v1/tenants/{id}/history for a configured
// tenant (another id is a 404), in one round trip.
func (s *Server) adminHistory(w http.ResponseWriter, r *http.Request, id, _ string) {
	snap := s.snap.Load()
	if _, ok := snap.tenants[id]; !ok || !keys.ValidTenant(id) {
		writeProblem(w, notFound("tenant", id))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	pts, err := depth.ReadHistory(ctx, s.rdb, id)
	if err != nil {
		writeProblem(w, s.redisProblem(snap, "history", err))
		return
	}
	writeJSON(w, http.StatusOK, historyAnswer{Tenant: id, StepSeconds: int64(keys.HistoryStep.Seconds()), Points: pts})
}
