package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
)

// The visibility API (docs/adr/0009-job-states.md), on ingest's listener:
//
//	GET    /v1/jobs/{id}            the job's state, queue position and ETA
//	                                (due_at of a scheduled job, heartbeat)
//	DELETE /v1/jobs/{id}            cancel it while it waits (queued,
//	                                retrying or scheduled)
//	POST   /v1/jobs/{id}:heartbeat  a heartbeat job's poll (heartbeat.go)
//	GET    /v1/tenants/{id}/stats   backlog, outflow rates, water level, in
//	                                flight, DLQ and drain ETA (visibility_stats.go)
//
// A tenant key sees its own tenant only: another tenant's job or stats is a
// 404, as an unknown one is, so an answer never tells whether it exists. An
// admin token (ingest.admin_tokens) sees every configured tenant; on the job
// routes it names the tenant with ?tenant=, or leaves it out and the job is
// looked up in every configured tenant.

// visibilityTimeout bounds the Redis work of one visibility request.
const visibilityTimeout = 2 * time.Second

// viewer is who sends a visibility request: a tenant (by its API key) or
// an admin (by an admin token).
type viewer struct {
	tenant string // the key's tenant; "" for an admin
	admin  string // the admin token's name; "" for a tenant
}

// authenticateViewer maps "Authorization: Bearer <key>" to a tenant key's
// tenant or to an admin token's name. A missing header and an unknown key
// are the same 401 as on the submission routes.
func (s *Server) authenticateViewer(r *http.Request, snap *snapshot) (viewer, *problem) {
	ts, p := authenticate(r, snap)
	if p == nil {
		return viewer{tenant: ts.name}, nil
	}
	if admins := s.admins.Load(); admins != nil {
		if name, ok := adminName(r, *admins); ok {
			return viewer{admin: name}, nil
		}
	}
	return viewer{}, p
}

// notFound is the 404 of a job or tenant the viewer cannot see.
func notFound(what, id string) *problem {
	return newProblem(http.StatusNotFound, "", fmt.Sprintf("no %s %q", what, id))
}

// redisProblem is the 503 of a visibility request whose Redis work failed.
func (s *Server) redisProblem(snap *snapshot, op string, err error) *problem {
	s.log.Warn("ingest: visibility request", "op", op, "err", err)
	p := newProblem(http.StatusServiceUnavailable, "", "job states cannot be read (redis); retry later")
	p.Backend, p.RetryAfter = "redis", retryAfterSeconds(snap.retryAfter)
	return p
}

// handleJobState serves GET and DELETE /v1/jobs/{id}.
func (s *Server) handleJobState(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodDelete {
		w.Header().Set("Allow", "GET, DELETE")
		writeProblem(w, newProblem(http.StatusMethodNotAllowed, "", r.Method+" is not allowed here; use GET or DELETE"))
		return
	}
	snap := s.snap.Load()
	ctx, cancel := context.WithTimeout(r.Context(), visibilityTimeout)
	defer cancel()
	id := r.PathValue("id")
	v, tenant, ok := s.jobRequest(ctx, w, r, snap, id)
	if !ok {
		return
	}
	if r.Method == http.MethodDelete {
		s.cancelJob(ctx, w, snap, tenant, id)
		return
	}
	mode := beatRead
	if v.tenant != "" {
		mode = beatPoll
	}
	s.getJob(ctx, w, snap, tenant, id, mode)
}

// jobRequest authenticates r, a request about job id, and finds the job's
// tenant (jobTenant); when it cannot, it has answered r and ok is false.
func (s *Server) jobRequest(ctx context.Context, w http.ResponseWriter, r *http.Request, snap *snapshot, id string) (v viewer, tenant string, ok bool) {
	v, p := s.authenticateViewer(r, snap)
	if p == nil && !keys.ValidID(id) {
		p = notFound("job", id)
	}
	var named string
	if p == nil {
		named, p = queryOf(r).get("tenant")
	}
	if p == nil {
		tenant, p = s.jobTenant(ctx, snap, v, named, id)
	}
	if p != nil {
		writeProblem(w, p)
		return v, "", false
	}
	return v, tenant, true
}

// jobTenant returns the tenant whose job id the viewer asks about: a tenant
// key's own (?tenant= naming another is a 404); for an admin, the
// configured tenant ?tenant= names, or else the one configured tenant that
// has a job with this id (a 400 when several have).
func (s *Server) jobTenant(ctx context.Context, snap *snapshot, v viewer, named, id string) (string, *problem) {
	switch {
	case v.tenant != "":
		if named != "" && named != v.tenant {
			return "", notFound("job", id)
		}
		return v.tenant, nil
	case named != "":
		if _, ok := snap.tenants[named]; !ok || !keys.ValidTenant(named) {
			return "", notFound("tenant", named)
		}
		return named, nil
	}
	all := make([]string, 0, len(snap.tenants))
	for t := range snap.tenants {
		all = append(all, t)
	}
	slices.Sort(all)
	owners, err := jobstate.Owners(ctx, s.rdb, all, id)
	if err != nil {
		return "", s.redisProblem(snap, "find job", err)
	}
	switch len(owners) {
	case 0:
		return "", notFound("job", id)
	case 1:
		return owners[0], nil
	}
	return "", newProblem(http.StatusBadRequest, "tenant",
		fmt.Sprintf("job id %q exists in tenants %s; name one with ?tenant=", id, strings.Join(owners, ", ")))
}

// jobStatus is the answer of GET /v1/jobs/{id}.
type jobStatus struct {
	JobID  string `json:"job_id"`
	Tenant string `json:"tenant"`
	Type   string `json:"type"`
	State  string `json:"state"`
	// Position is how many of the tenant's jobs are ahead (0: next to
	// leave), for a queued job; null otherwise.
	Position *int64 `json:"position"`
	// ETASeconds is Position ÷ the tenant's effective outflow rate, for a
	// queued job of a rate-limited tenant; null otherwise.
	ETASeconds *float64   `json:"eta_seconds"`
	Attempt    int        `json:"attempt"`
	EnqueuedAt *time.Time `json:"enqueued_at"`
	UpdatedAt  *time.Time `json:"updated_at"`
	// LastError is the last failed delivery's error; for a dead job it is
	// prefixed with the reason ("rejected: ...").
	LastError string `json:"last_error"`
	// DueAt is when a scheduled job falls due; null otherwise.
	DueAt *time.Time `json:"due_at"`
	// Heartbeat is a heartbeat job's interval and beats; null otherwise.
	Heartbeat *jobHeartbeat `json:"heartbeat"`
}

// getJob answers GET /v1/jobs/{id}: the recorded state, a scheduled job's
// due time and a heartbeat job's beats (first refreshed as mode says;
// lua/job_beat.lua, in the same round trip as the record), and for a
// queued job its position and ETA (one more round trip for the tenant's
// effective rate).
func (s *Server) getJob(ctx context.Context, w http.ResponseWriter, snap *snapshot, tenant, id string, mode beatMode) {
	beat := beatCall(tenant, id, mode)
	rec, beatCmd, err := jobstate.GetWith(ctx, s.rdb, tenant, id, &beat)
	x, xerr := parseExtras(beatCmd, id)
	if xerr != nil && !errors.Is(err, jobstate.ErrNotFound) {
		err = xerr
	}
	switch {
	case errors.Is(err, jobstate.ErrNotFound):
		writeProblem(w, notFound("job", id))
		return
	case err != nil:
		writeProblem(w, s.redisProblem(snap, "get job", err))
		return
	}
	if mode == beatRefresh && x.heartbeat == nil {
		writeProblem(w, notHeartbeat(tenant, id))
		return
	}
	var rate *outflowAnswer
	if rec.State == jobstate.Queued && rec.Ahead >= 0 {
		st, err := s.readStats(ctx, snap, tenant)
		if err != nil {
			writeProblem(w, s.redisProblem(snap, "get job", err))
			return
		}
		rate = &st.Outflow
	}
	out := newJobStatus(rec, rate)
	out.DueAt, out.Heartbeat = x.dueAt, x.heartbeat
	writeJSON(w, http.StatusOK, out)
}

// newJobStatus is the answer of GET /v1/jobs/{id} (and an item of GET
// /v1/jobs) for rec; a queued job gets its position, and its ETA from the
// tenant's outflow rate (nil: none known).
func newJobStatus(rec jobstate.Record, rate *outflowAnswer) jobStatus {
	out := jobStatus{JobID: rec.JobID, Tenant: rec.Tenant, Type: rec.Type, State: rec.State, Attempt: rec.Attempt,
		EnqueuedAt: timeOrNil(rec.EnqueuedAt), UpdatedAt: timeOrNil(rec.UpdatedAt), LastError: rec.LastError,
		DueAt: timeOrNil(rec.DueAt), Heartbeat: heartbeatOf(rec)}
	if rec.Reason != "" {
		out.LastError = strings.TrimSuffix(rec.Reason+": "+rec.LastError, ": ")
	}
	if rec.State == jobstate.Queued && rec.Ahead >= 0 {
		ahead := rec.Ahead
		out.Position = &ahead
		if rate != nil && !rate.Unlimited && rate.EffectiveRate > 0 {
			if eta := float64(ahead) / rate.EffectiveRate; !math.IsInf(eta, 0) {
				out.ETASeconds = &eta
			}
		}
	}
	return out
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// cancelAnswer is the answer of DELETE /v1/jobs/{id}.
type cancelAnswer struct {
	JobID string `json:"job_id"`
	State string `json:"state"`
}

// cancelJob answers DELETE /v1/jobs/{id}: 200 when the job was waiting and
// is now cancelled, 409 naming the state that forbids it, 404 when unknown.
func (s *Server) cancelJob(ctx context.Context, w http.ResponseWriter, snap *snapshot, tenant, id string) {
	done, err := s.cancelScheduled(ctx, tenant, id)
	if done {
		writeJSON(w, http.StatusOK, cancelAnswer{JobID: id, State: jobstate.Cancelled})
		return
	}
	if err == nil {
		err = jobstate.Cancel(ctx, s.rdb, tenant, id)
	}
	var conflict *jobstate.ConflictError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, cancelAnswer{JobID: id, State: jobstate.Cancelled})
	case errors.Is(err, jobstate.ErrNotFound):
		writeProblem(w, notFound("job", id))
	case errors.As(err, &conflict):
		p := newProblem(http.StatusConflict, "",
			fmt.Sprintf("job %q is %s; only a queued, retrying or scheduled job can be cancelled", id, conflict.State))
		p.Tenant = tenant
		writeProblem(w, p)
	default:
		writeProblem(w, s.redisProblem(snap, "cancel job", err))
	}
}
