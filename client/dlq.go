package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// DeadLetter is one dead job in a tenant's dead-letter list.
type DeadLetter struct {
	JobID string `json:"job_id"`
	Type  string `json:"type"`
	// Reason is why the job died: rejected, attempts_exhausted, poison,
	// cost_exceeds_capacity.
	Reason string `json:"reason"`
	// Status is the sink's last HTTP status (0 when none).
	Status   int       `json:"status"`
	Attempts int       `json:"attempts"`
	FailedAt time.Time `json:"failed_at"`
	// LastError is the last delivery error.
	LastError string `json:"last_error"`
	// Excerpt is the start of the payload's JSON (256 bytes);
	// ExcerptTruncated says it is not all of it.
	Excerpt          string `json:"excerpt"`
	ExcerptTruncated bool   `json:"excerpt_truncated"`
	// Truncated says the dead letter was cut to the server's record bound:
	// its payload is not kept and it cannot be redriven.
	Truncated bool `json:"truncated"`
}

// DeadLetterDetail is one dead letter in full.
type DeadLetterDetail struct {
	DeadLetter
	Tenant string `json:"tenant"`
	// Payload is the job's payload (null when not kept).
	Payload json.RawMessage `json:"payload"`
	// Response is the start of the sink's last response body.
	Response string `json:"response"`
}

// DeadLetterPage is one page of a tenant's dead letters, newest first.
type DeadLetterPage struct {
	Tenant string       `json:"tenant"`
	Jobs   []DeadLetter `json:"jobs"`
	// NextCursor continues with the older dead letters; "" on the last
	// page.
	NextCursor string `json:"next_cursor"`
}

// Redriven is the answer of a redrive.
type Redriven struct {
	// Redriven counts the jobs put back on the queue.
	Redriven int `json:"redriven"`
	// Skipped are the dead letters that could not be (reason poison or
	// truncated); they stay.
	Skipped []Skipped `json:"skipped"`
}

// Skipped is a dead letter a redrive left in the DLQ, and why.
type Skipped struct {
	JobID  string `json:"job_id"`
	Reason string `json:"reason"`
}

func dlqPath(tenant string) string { return tenantPath(tenant) + "/dlq" }

// DeadLetters returns one page of tenant's dead letters, newest first (GET
// /admin/v1/tenants/{id}/dlq?limit=&cursor=): at most limit (0: the
// server's default, 50; at most 100), after cursor ("" for the newest).
func (a *Admin) DeadLetters(ctx context.Context, tenant string, limit int, cursor string) (DeadLetterPage, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := dlqPath(tenant)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p DeadLetterPage
	err := a.c.do(ctx, http.MethodGet, path, nil, &p)
	return p, err
}

// DeadLetter returns one dead letter with its payload (GET …/dlq/{job_id});
// one not in the DLQ is an *Error with Status 404.
func (a *Admin) DeadLetter(ctx context.Context, tenant, id string) (DeadLetterDetail, error) {
	var d DeadLetterDetail
	err := a.c.do(ctx, http.MethodGet, dlqPath(tenant)+"/"+url.PathEscape(id), nil, &d)
	return d, err
}

// Redrive puts tenant's dead jobs ids (1 to 1000) back on its queue (POST
// …/dlq:redrive). Unlike the other admin calls it is not idempotent: a
// retry after an unclear failure may enqueue a job twice (at least once;
// the sink sees the same Sluice-Job-Id).
func (a *Admin) Redrive(ctx context.Context, tenant string, ids []string) (Redriven, error) {
	var r Redriven
	err := a.c.do(ctx, http.MethodPost, dlqPath(tenant)+":redrive", map[string]any{"job_ids": ids}, &r)
	return r, err
}

// RedriveAll puts every dead job of tenant back on its queue (POST
// …/dlq:redrive {"all": true}); see Redrive.
func (a *Admin) RedriveAll(ctx context.Context, tenant string) (Redriven, error) {
	var r Redriven
	err := a.c.do(ctx, http.MethodPost, dlqPath(tenant)+":redrive", map[string]any{"all": true}, &r)
	return r, err
}

// DeleteDeadLetter deletes one dead letter (DELETE …/dlq/{job_id}); one not
// in the DLQ is an *Error with Status 404.
func (a *Admin) DeleteDeadLetter(ctx context.Context, tenant, id string) error {
	return a.c.do(ctx, http.MethodDelete, dlqPath(tenant)+"/"+url.PathEscape(id), nil, nil)
}

// DeleteDeadLetters deletes every dead letter of tenant (DELETE …/dlq) and
// returns how many there were.
func (a *Admin) DeleteDeadLetters(ctx context.Context, tenant string) (int, error) {
	var out struct {
		Deleted int `json:"deleted"`
	}
	err := a.c.do(ctx, http.MethodDelete, dlqPath(tenant), nil, &out)
	return out.Deleted, err
}
