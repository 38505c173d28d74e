package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Admin calls sluice's admin API (/admin/v1: tenants and their audit log)
// and the visibility API with an admin token. It retries 429, 503 and
// connection errors as Client does; every admin call but a redrive is
// idempotent (PUT, DELETE and a JSON merge patch give the same result when
// repeated), so a retry after an unclear failure is safe (a redrive's may
// enqueue a job twice: at least once). It is safe for concurrent use.
type Admin struct {
	c *Client
}

// NewAdmin returns an admin client of the ingest at baseURL authenticating
// with an admin token (configured hashed under ingest.admin_tokens).
func NewAdmin(baseURL, token string, opts ...Option) *Admin {
	return &Admin{c: New(baseURL, token, opts...)}
}

// TenantSpec is a tenant's configuration as the admin API takes and gives
// it: the same names and shape as a tenant in the YAML configuration. Zero
// fields are left out of the JSON, so the server applies its defaults.
type TenantSpec struct {
	// APIKeys are the tenant's keys, hashed: "sha256:<hex>" (see
	// config.HashKey).
	APIKeys []string `json:"api_keys,omitempty"`
	// Admission is the tenant-wide admission policy.
	Admission Admission `json:"admission,omitzero"`
	// JobTypes add per-type policies and targets.
	JobTypes map[string]JobType `json:"job_types,omitempty"`
	// Outflow shapes delivery to the downstream.
	Outflow Outflow `json:"outflow,omitzero"`
	// Target is where jobs are delivered.
	Target Target `json:"target,omitzero"`
	// OnLimiterError is "allow" or "deny": what ingest does when Redis
	// cannot be reached.
	OnLimiterError string `json:"on_limiter_error,omitempty"`
}

// Admission is one admission policy: Limit units per Period, Burst at once
// (gcra and token_bucket).
type Admission struct {
	Algorithm string   `json:"algorithm,omitempty"`
	Limit     int64    `json:"limit,omitempty"`
	Period    Duration `json:"period,omitzero"`
	Burst     int64    `json:"burst,omitempty"`
}

// JobType is a job type's own policy and target.
type JobType struct {
	Admission Admission `json:"admission,omitzero"`
	Target    Target    `json:"target,omitzero"`
}

// Outflow is the tenant's drain-side leaky bucket: Rate units per second
// across all drainers (> 0, at most 1,000,000), Capacity units at once; or
// Unlimited, without a Rate. The server refuses a rate of 0 (422): it is
// never a way to say unlimited.
type Outflow struct {
	Rate        float64 `json:"rate,omitempty"`
	Unlimited   bool    `json:"unlimited,omitempty"`
	Capacity    float64 `json:"capacity,omitempty"`
	MaxBacklog  int64   `json:"max_backlog,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	// Adaptive is nil when not given (the server's default: on).
	Adaptive *bool   `json:"adaptive,omitempty"`
	MinRate  float64 `json:"min_rate,omitempty"`
	// Paused says no delivery of the tenant's jobs starts (outflow.paused).
	Paused bool `json:"paused,omitempty"`
}

// Target is a downstream endpoint.
type Target struct {
	URL     string   `json:"url,omitempty"`
	Timeout Duration `json:"timeout,omitzero"`
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("1s", "1m30s"). Decoding also takes a JSON number of nanoseconds.
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		n, nerr := strconv.ParseInt(string(b), 10, 64)
		if nerr != nil {
			return fmt.Errorf("duration %s: want a string such as \"1s\"", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// Tenant is a tenant as the admin API reports it.
type Tenant struct {
	ID string `json:"id"`
	// Source is "config" (from the configuration file) or "runtime" (set
	// through the admin API, stored in Redis).
	Source string     `json:"source"`
	Spec   TenantSpec `json:"spec"`
	// Version counts the tenant's runtime changes (0 when not reported).
	Version int64 `json:"version,omitempty"`
}

// AuditEntry is one change of a tenant: who (the admin token's name) did
// what, and the fields it set, changed or removed.
type AuditEntry struct {
	At     time.Time `json:"at"`
	Who    string    `json:"who"`
	Action string    `json:"action"`
	// Version is the tenant's version after the change.
	Version int64 `json:"version"`
	// Changes are the fields changed, by path; a create lists every field
	// of the new spec, a delete every field of the old one.
	Changes []AuditChange `json:"changes"`
	// ChangesTotal is how many fields changed; more than len(Changes) when
	// Truncated.
	ChangesTotal int `json:"changes_total"`
	// Truncated says Changes lists only the first changes by path (an entry
	// is at most 4 KiB).
	Truncated bool `json:"truncated"`
}

// AuditChange is one field of a change.
type AuditChange struct {
	// Path is the field's dotted path in the spec ("outflow.rate").
	Path string `json:"path"`
	// Old and New are the field's value before and after as JSON text
	// ("5", `"http://x"`); nil when it was not set, or was removed.
	Old *string `json:"old"`
	New *string `json:"new"`
	// Truncated says Path, Old or New was cut (to 256 bytes of JSON).
	Truncated bool `json:"truncated"`
}

// AuditPage is one page of a tenant's changes, newest first.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	// NextCursor continues with the older entries (AuditPage's cursor);
	// "" on the last page.
	NextCursor string `json:"next_cursor"`
}

// Tenants lists every tenant, from the configuration and from runtime
// changes (GET /admin/v1/tenants).
func (a *Admin) Tenants(ctx context.Context) ([]Tenant, error) {
	var out struct {
		Tenants []Tenant `json:"tenants"`
	}
	err := a.c.do(ctx, http.MethodGet, "/admin/v1/tenants", nil, &out)
	return out.Tenants, err
}

// Tenant returns one tenant (GET /admin/v1/tenants/{id}); an unknown id is
// an *Error with Status 404.
func (a *Admin) Tenant(ctx context.Context, id string) (Tenant, error) {
	var t Tenant
	err := a.c.do(ctx, http.MethodGet, tenantPath(id), nil, &t)
	return t, err
}

// PutTenant creates or replaces a tenant's whole spec (PUT
// /admin/v1/tenants/{id}); created reports a new tenant (201) rather than a
// replaced one (200). An invalid spec is an *Error with Status 422 whose
// Field names the key.
func (a *Admin) PutTenant(ctx context.Context, id string, spec TenantSpec) (t Tenant, created bool, err error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return Tenant{}, false, fmt.Errorf("sluice: encode spec: %w", err)
	}
	status, err := a.c.call(ctx, http.MethodPut, tenantPath(id), "application/json", body, &t)
	return t, status == http.StatusCreated, err
}

// PatchTenant changes part of a tenant's spec with a JSON merge patch (RFC
// 7396; PATCH /admin/v1/tenants/{id}): patch is any value that encodes to a
// JSON object, such as map[string]any{"outflow": map[string]any{"rate": 20}}
// or a json.RawMessage. A null member removes the key.
func (a *Admin) PatchTenant(ctx context.Context, id string, patch any) (Tenant, error) {
	body, err := json.Marshal(patch)
	if err != nil {
		return Tenant{}, fmt.Errorf("sluice: encode patch: %w", err)
	}
	var t Tenant
	_, err = a.c.call(ctx, http.MethodPatch, tenantPath(id), "application/merge-patch+json", body, &t)
	return t, err
}

// DeleteTenant removes a tenant (DELETE /admin/v1/tenants/{id}); an unknown
// id is an *Error with Status 404.
func (a *Admin) DeleteTenant(ctx context.Context, id string) error {
	return a.c.do(ctx, http.MethodDelete, tenantPath(id), nil, nil)
}

// AuditPage returns one page of a tenant's changes, newest first (GET
// /admin/v1/tenants/{id}/audit?limit=&cursor=): at most limit entries (0
// for the server's default; the server takes 1 to 100), older than cursor
// ("" for the newest). Pass NextCursor back for the next page; entries
// added meanwhile do not shift the pages.
func (a *Admin) AuditPage(ctx context.Context, id string, limit int, cursor string) (AuditPage, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := tenantPath(id) + "/audit"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p AuditPage
	err := a.c.do(ctx, http.MethodGet, path, nil, &p)
	return p, err
}

// Audit returns every change of a tenant the server keeps (the newest
// 1000, at most 1 MiB), newest first, following the pages' cursors.
func (a *Admin) Audit(ctx context.Context, id string) ([]AuditEntry, error) {
	var out []AuditEntry
	for cursor := ""; ; {
		p, err := a.AuditPage(ctx, id, 0, cursor)
		if err != nil {
			return out, err
		}
		out = append(out, p.Entries...)
		if p.NextCursor == "" {
			return out, nil
		}
		if p.NextCursor == cursor {
			return out, fmt.Errorf("sluice: audit of %s: the server answered the same cursor %q again", id, cursor)
		}
		cursor = p.NextCursor
	}
}

// Stats returns any tenant's backlog and outflow (GET
// /v1/tenants/{id}/stats); see Client.Stats.
func (a *Admin) Stats(ctx context.Context, tenant string) (Stats, error) {
	return a.c.Stats(ctx, tenant)
}

func tenantPath(id string) string { return "/admin/v1/tenants/" + url.PathEscape(id) }
