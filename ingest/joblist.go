package ingest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
)

// The job lists (docs/adr/0009-job-states.md), on ingest's listener:
//
//	GET /v1/jobs?state=S&limit=N&cursor=C   a page of the tenant's jobs in
//	                                         state S; an admin adds &tenant=
//
// S is one of keys.ListedStates. Each item is the object GET /v1/jobs/{id}
// answers (newJobStatus), a queued one with its position and ETA. Order:
// queued by position, scheduled by due time, in_flight by start, retrying
// by due time, dead and done newest first. limit is 1 to jobstate.ListMax
// (default jobstate.ListDefault); next_cursor, null on the last page, is
// opaque and stays right while jobs move (jobstate.Cursor).

// jobRoutes registers the job list on route. /v1/jobs itself (POST, the
// submission, and the 405 of other methods) is submitRoute's.
func (s *Server) jobRoutes(route func(pattern, name string, h http.HandlerFunc)) {
	route("GET /v1/jobs", "jobs_list", s.handleJobList)
}

// submitRoute serves /v1/jobs for every method but GET (the more specific
// pattern "GET /v1/jobs" is the list): POST submits a job (handleJob), any
// other method is a 405 with Allow: GET, POST.
func (s *Server) submitRoute(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		writeProblem(w, newProblem(http.StatusMethodNotAllowed, "", r.Method+" is not allowed here; use GET or POST"))
		return
	}
	s.handleJob(w, r)
}

// jobList is the answer of GET /v1/jobs.
type jobList struct {
	Tenant string      `json:"tenant"`
	State  string      `json:"state"`
	Jobs   []jobStatus `json:"jobs"`
	// NextCursor is the cursor of the next page; null on the last.
	NextCursor *string `json:"next_cursor"`
}

// listQuery is GET /v1/jobs's query, checked.
type listQuery struct {
	state string
	limit int
	after *jobstate.Cursor
}

// parseListQuery reads state, limit and cursor; a bad one is a 400 naming it.
func parseListQuery(r *http.Request) (listQuery, *problem) {
	q := queryOf(r)
	lq := listQuery{limit: jobstate.ListDefault}
	state, p := q.get("state")
	if p != nil {
		return lq, p
	}
	lq.state = state
	if !slices.Contains(keys.ListedStates, lq.state) {
		return lq, newProblem(http.StatusBadRequest, "state",
			fmt.Sprintf("state must be one of %s (got %q)", strings.Join(keys.ListedStates, ", "), lq.state))
	}
	if lq.limit, p = q.limit(jobstate.ListDefault, jobstate.ListMax); p != nil {
		return lq, p
	}
	v, p := q.get("cursor")
	if p != nil {
		return lq, p
	}
	if v != "" {
		c, err := jobstate.ParseCursor(v)
		if err != nil {
			return lq, newProblem(http.StatusBadRequest, "cursor", "cursor is not a next_cursor of this list; start again without it")
		}
		lq.after = &c
	}
	return lq, nil
}

// listTenant is the tenant whose jobs the viewer lists: a tenant key's own
// (?tenant= naming another is a 404), or for an admin the configured
// tenant ?tenant= names (required).
func listTenant(snap *snapshot, v viewer, named string) (string, *problem) {
	switch {
	case v.tenant != "":
		if named != "" && named != v.tenant {
			return "", notFound("tenant", named)
		}
		return v.tenant, nil
	case named == "":
		return "", newProblem(http.StatusBadRequest, "tenant", "an admin token lists one tenant's jobs: add ?tenant=")
	}
	if _, ok := snap.tenants[named]; !ok || !keys.ValidTenant(named) {
		return "", notFound("tenant", named)
	}
	return named, nil
}

// handleJobList serves GET /v1/jobs: one round trip for the page
// (jobstate.List), one more for the tenant's outflow rate when the page
// holds queued jobs (their ETA).
func (s *Server) handleJobList(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	snap := s.snap.Load()
	v, p := s.authenticateViewer(r, snap)
	if p != nil {
		writeProblem(w, p)
		return
	}
	named, p := queryOf(r).get("tenant")
	if p != nil {
		writeProblem(w, p)
		return
	}
	tenant, p := listTenant(snap, v, named)
	if p != nil {
		writeProblem(w, p)
		return
	}
	lq, p := parseListQuery(r)
	if p != nil {
		writeProblem(w, p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), visibilityTimeout)
	defer cancel()
	page, err := jobstate.List(ctx, s.rdb, tenant, lq.state, lq.after, lq.limit)
	if err != nil {
		writeProblem(w, s.redisProblem(snap, "list jobs", err))
		return
	}
	var rate *outflowAnswer
	if lq.state == jobstate.Queued && len(page.Jobs) > 0 {
		st, err := s.readStats(ctx, snap, tenant)
		if err != nil {
			writeProblem(w, s.redisProblem(snap, "list jobs", err))
			return
		}
		rate = &st.Outflow
	}
	out := jobList{Tenant: tenant, State: lq.state, Jobs: make([]jobStatus, 0, len(page.Jobs))}
	for _, rec := range page.Jobs {
		out.Jobs = append(out.Jobs, newJobStatus(rec, rate))
	}
	if page.Next != nil {
		c := page.Next.String()
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
}
