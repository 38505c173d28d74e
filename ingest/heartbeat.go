package ingest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// Heartbeat jobs: a job submitted with "heartbeat": "30s" stays wanted while
// its submitter polls it at least that often, by GET /v1/jobs/{id} with the
// job's tenant key or by POST /v1/jobs/{id}:heartbeat. Each poll of a job
// that still waits (queued, scheduled, retrying) sets its beat_at (Redis
// TIME; lua/job_beat.lua). A drainer drops one whose last beat is older than
// its interval when it reaches the head of its lane (state expired, reason
// heartbeat), without an outflow slot; until the first poll its enqueue
// (for a scheduled job, its due time) counts as the last beat.
//
// The heartbeat route is POST /v1/jobs/{id} with an id ending in
// ":heartbeat": ServeMux cannot put a wildcard and a literal in one path
// segment. A job id may itself end in ":heartbeat" (":" is allowed in ids):
// GET and DELETE of it are unaffected, and POST always means a heartbeat.

// heartbeatSuffix ends the path segment of the heartbeat route.
const heartbeatSuffix = ":heartbeat"

// heartbeatRoutes adds POST /v1/jobs/{id}:heartbeat.
func (s *Server) heartbeatRoutes(route func(pattern, name string, h http.HandlerFunc)) {
	route("POST /v1/jobs/{id}", "job_heartbeat", s.handleHeartbeat)
}

// jobHeartbeat is the "heartbeat" member of a heartbeat job's object.
type jobHeartbeat struct {
	// Interval is the job's heartbeat interval as submitted ("30s").
	Interval string `json:"interval"`
	// LastBeat is the last poll (or the enqueue / due time before the first).
	LastBeat time.Time `json:"last_beat"`
	// ExpiresAt is LastBeat + Interval: the job is dropped if it reaches
	// the head of its queue after this without another poll.
	ExpiresAt time.Time `json:"expires_at"`
}

// handleHeartbeat serves POST /v1/jobs/{id}:heartbeat: 200 with the job
// object after refreshing its beat; 409 for a job that is not a heartbeat
// job; 404 as GET; 405 for a POST to any other /v1/jobs/{id}.
func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	id, ok := strings.CutSuffix(r.PathValue("id"), heartbeatSuffix)
	if !ok {
		w.Header().Set("Allow", "GET, DELETE")
		writeProblem(w, newProblem(http.StatusMethodNotAllowed, "",
			"POST is not allowed here; use GET or DELETE, or POST /v1/jobs/{id}:heartbeat"))
		return
	}
	snap := s.snap.Load()
	ctx, cancel := context.WithTimeout(r.Context(), visibilityTimeout)
	defer cancel()
	if _, tenant, ok := s.jobRequest(ctx, w, r, snap, id); ok {
		s.getJob(ctx, w, snap, tenant, id, beatRefresh)
	}
}

// beatMode says what a job read does with its heartbeat.
type beatMode int

const (
	beatRead    beatMode = iota // read only (an admin's GET)
	beatPoll                    // refresh when a heartbeat job (the tenant's GET)
	beatRefresh                 // refresh, and 409 when not a heartbeat job (POST …:heartbeat)
)

// jobExtras is what lua/job_beat.lua reads of a job besides jobstate.Get.
type jobExtras struct {
	heartbeat *jobHeartbeat
	dueAt     *time.Time
}

// beatCall is job_beat.lua on tenant's job id (refreshing its beat unless
// mode is beatRead); parseExtras reads its reply.
func beatCall(tenant, id string, mode beatMode) lua.Call {
	refresh := "1"
	if mode == beatRead {
		refresh = "0"
	}
	return lua.Call{Script: lua.JobBeat, Keys: []string{keys.JobState(tenant, id)}, Args: []any{refresh}}
}

// parseExtras reads job_beat.lua's reply (cmd) for job id.
func parseExtras(cmd *redis.Cmd, id string) (jobExtras, error) {
	v, err := cmd.Result()
	if err != nil {
		return jobExtras{}, fmt.Errorf("ingest: heartbeat of %s: %w", id, err)
	}
	n, err := lua.JobBeat.Ints(v, 4)
	if err != nil {
		return jobExtras{}, fmt.Errorf("ingest: heartbeat of %s: %w", id, err)
	}
	var x jobExtras
	if hb := time.Duration(n[0]) * time.Millisecond; hb > 0 {
		last := time.UnixMilli(n[1]).UTC()
		x.heartbeat = &jobHeartbeat{Interval: hb.String(), LastBeat: last, ExpiresAt: last.Add(hb)}
	}
	if n[3] > 0 {
		due := time.UnixMilli(n[3]).UTC()
		x.dueAt = &due
	}
	return x, nil
}

// heartbeatOf is rec's heartbeat as GET /v1/jobs lists it (no refresh): the
// last beat is the latest of beat_at, enqueued_at and due_at, as
// lua/job_beat.lua reads it for GET /v1/jobs/{id}; nil for a job without one.
func heartbeatOf(rec jobstate.Record) *jobHeartbeat {
	if rec.Heartbeat <= 0 {
		return nil
	}
	last := rec.BeatAt
	for _, t := range []time.Time{rec.EnqueuedAt, rec.DueAt} {
		if t.After(last) {
			last = t
		}
	}
	return &jobHeartbeat{Interval: rec.Heartbeat.String(), LastBeat: last, ExpiresAt: last.Add(rec.Heartbeat)}
}

// notHeartbeat is the 409 of POST …:heartbeat for a job without one.
func notHeartbeat(tenant, id string) *problem {
	p := newProblem(http.StatusConflict, "", fmt.Sprintf("job %q is not a heartbeat job (it was submitted without \"heartbeat\")", id))
	p.Tenant = tenant
	return p
}
