package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Stats is a tenant's state on the drain side (GET /v1/tenants/{id}/stats).
type Stats struct {
	Tenant string `json:"tenant"`
	// Backlog is the tenant's queued, not yet finished units.
	Backlog int64        `json:"backlog"`
	Outflow OutflowStats `json:"outflow"`
	// WaterLevel is the shared leaky bucket's level in units, out of
	// Outflow.Capacity.
	WaterLevel float64 `json:"water_level"`
	// InFlight is the tenant's jobs being delivered right now.
	InFlight int64 `json:"in_flight"`
	// DLQ is the tenant's dead jobs.
	DLQ int64 `json:"dlq"`
	// ETASeconds is Backlog ÷ Outflow.EffectiveRate: when the backlog will
	// have drained. Nil when the outflow is unlimited (Outflow.Unlimited).
	ETASeconds *float64 `json:"eta_seconds"`
	// Paused says the tenant's outflow is paused: no delivery starts, while
	// its jobs are still admitted (outflow.paused).
	Paused bool `json:"paused"`
	// Admission is the jobs admitted and refused per second.
	Admission AdmissionStats `json:"admission"`
}

// AdmissionStats is a tenant's admission decisions in jobs per second over
// the last 10 complete seconds, across all ingest instances.
type AdmissionStats struct {
	// AdmittedRate is the jobs admitted (202) per second.
	AdmittedRate float64 `json:"admitted_rate"`
	// RefusedRate is the jobs refused with 429 (a policy or the backlog
	// gate) per second.
	RefusedRate float64 `json:"refused_rate"`
}

// OutflowStats compares the tenant's outflow rates, in units per second.
type OutflowStats struct {
	// Unlimited says the tenant's outflow has no rate limit; the rates and
	// capacity are then 0.
	Unlimited bool `json:"unlimited"`
	// ConfiguredRate is outflow.rate (with a runtime change applied).
	ConfiguredRate float64 `json:"configured_rate"`
	// EffectiveRate is the rate drainers use now: below ConfiguredRate
	// while adaptive backoff answers a downstream's 429/503.
	EffectiveRate float64 `json:"effective_rate"`
	// MeasuredRate is the jobs per second delivered across all drainers
	// over the last 10 s.
	MeasuredRate float64 `json:"measured_rate"`
	// Capacity is the leaky bucket's size in units.
	Capacity float64 `json:"capacity"`
}

// Job states of JobStatus.State.
const (
	StateQueued    = "queued"
	StateInFlight  = "in_flight"
	StateRetrying  = "retrying"
	StateDone      = "done"
	StateDead      = "dead"
	StateCancelled = "cancelled"
	StateExpired   = "expired"
)

// JobStatus is one job's state (GET /v1/jobs/{id}).
type JobStatus struct {
	JobID  string `json:"job_id"`
	Tenant string `json:"tenant"`
	Type   string `json:"type"`
	// State is one of the State* constants.
	State string `json:"state"`
	// Position is how many of the tenant's jobs are ahead (0: next to
	// leave), nil when the job is not queued.
	Position *int64 `json:"position"`
	// ETASeconds is Position ÷ the tenant's effective outflow rate, nil
	// when the job is not queued or the outflow is unlimited.
	ETASeconds *float64 `json:"eta_seconds"`
	Attempt    int      `json:"attempt"`
	// EnqueuedAt and UpdatedAt are zero when the server does not know them.
	EnqueuedAt time.Time `json:"enqueued_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// LastError is the last failed delivery's reason.
	LastError string `json:"last_error,omitempty"`
	// DueAt is a scheduled job's due time (state "scheduled"), else nil.
	DueAt *time.Time `json:"due_at,omitempty"`
	// Heartbeat is a heartbeat job's interval and beats, else nil.
	Heartbeat *JobHeartbeat `json:"heartbeat,omitempty"`
}

// Stats returns the backlog, outflow rates, water level, jobs in flight,
// dead jobs and drain ETA of tenant (GET /v1/tenants/{id}/stats). A tenant
// key sees only its own tenant: another tenant's stats are an *Error with
// Status 404, as an unknown tenant's.
func (c *Client) Stats(ctx context.Context, tenant string) (Stats, error) {
	var st Stats
	err := c.do(ctx, http.MethodGet, "/v1/tenants/"+url.PathEscape(tenant)+"/stats", nil, &st)
	return st, err
}

// Job returns the state of one of the tenant's jobs (GET /v1/jobs/{id});
// an unknown id, or another tenant's, is an *Error with Status 404.
func (c *Client) Job(ctx context.Context, id string) (JobStatus, error) {
	var js JobStatus
	err := c.do(ctx, http.MethodGet, jobPath(id), nil, &js)
	return js, err
}

// Cancel cancels a queued job (DELETE /v1/jobs/{id}) and returns its new
// state, "cancelled". A job already in flight, done or dead cannot be
// cancelled: an *Error with Status 409.
func (c *Client) Cancel(ctx context.Context, id string) (JobStatus, error) {
	var js JobStatus
	err := c.do(ctx, http.MethodDelete, jobPath(id), nil, &js)
	return js, err
}

// Job returns the state of a job of tenant (GET /v1/jobs/{id}?tenant=);
// with tenant "" the server looks the id up in every configured tenant and
// answers 400 when several have it.
func (a *Admin) Job(ctx context.Context, tenant, id string) (JobStatus, error) {
	var js JobStatus
	err := a.c.do(ctx, http.MethodGet, adminJobPath(tenant, id), nil, &js)
	return js, err
}

// Cancel cancels a waiting job of tenant (DELETE /v1/jobs/{id}?tenant=);
// tenant "" is looked up as in Job.
func (a *Admin) Cancel(ctx context.Context, tenant, id string) (JobStatus, error) {
	var js JobStatus
	err := a.c.do(ctx, http.MethodDelete, adminJobPath(tenant, id), nil, &js)
	return js, err
}

func jobPath(id string) string { return "/v1/jobs/" + url.PathEscape(id) }

func adminJobPath(tenant, id string) string {
	if tenant == "" {
		return jobPath(id)
	}
	return jobPath(id) + "?tenant=" + url.QueryEscape(tenant)
}
