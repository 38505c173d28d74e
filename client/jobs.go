package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// JobsQuery asks for one page of a tenant's jobs in one state (GET
// /v1/jobs).
type JobsQuery struct {
	// State is queued, scheduled, in_flight, retrying, dead or done.
	State string
	// Tenant names the tenant; required with an admin token, optional with
	// a tenant key (its own tenant).
	Tenant string
	// Limit is the page size, 1 to 500 (0: the server's default, 50).
	Limit int
	// Cursor is an earlier page's NextCursor ("" for the first page).
	Cursor string
}

// JobPage is one page of GET /v1/jobs.
type JobPage struct {
	Tenant string      `json:"tenant"`
	State  string      `json:"state"`
	Jobs   []JobStatus `json:"jobs"`
	// NextCursor is the next page's cursor, "" on the last page.
	NextCursor string `json:"next_cursor"`
}

// Jobs returns one page of a tenant's jobs in q.State: queued by position
// (with Position and ETASeconds), scheduled by due time, in_flight by
// start, retrying by due time, dead and done newest first. Pass NextCursor
// back as q.Cursor for the next page; jobs that move meanwhile do not
// shift the pages.
func (c *Client) Jobs(ctx context.Context, q JobsQuery) (JobPage, error) {
	v := url.Values{"state": {q.State}}
	if q.Tenant != "" {
		v.Set("tenant", q.Tenant)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	var p struct {
		JobPage
		NextCursor *string `json:"next_cursor"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/jobs?"+v.Encode(), nil, &p)
	page := p.JobPage
	if p.NextCursor != nil {
		page.NextCursor = *p.NextCursor
	}
	return page, err
}

// Jobs returns one page of a tenant's jobs (q.Tenant is required); see
// Client.Jobs.
func (a *Admin) Jobs(ctx context.Context, q JobsQuery) (JobPage, error) {
	return a.c.Jobs(ctx, q)
}

// Purge cancels every waiting job of tenant (POST
// /admin/v1/tenants/{id}/queue:purge) and returns how many it cancelled.
// A retry after an unclear failure purges what is left, so it is safe.
func (a *Admin) Purge(ctx context.Context, tenant string) (int64, error) {
	var out struct {
		Purged int64 `json:"purged"`
	}
	err := a.c.do(ctx, http.MethodPost, tenantPath(tenant)+"/queue:purge", nil, &out)
	return out.Purged, err
}
