// Package client is a Go client of sluice's ingest API that follows good
// client etiquette: on 429 or 503 (and a 409 with Retry-After: the job's id
// is held by another request) it waits as long as Retry-After says when
// the server says it, otherwise it backs off exponentially with full jitter
// under a cap, and it gives up after a bounded number of tries. Submissions
// carry a job id, generated when the caller gives none, and a retry sends
// the same body with the same id, so a retry after an unclear failure is
// deduplicated by the server instead of enqueued twice: also after a 503
// whose enqueue outcome is unknown (the job may be queued), where the server
// keeps the id and enqueues the same job (same job id and enqueued_at), and a
// drainer delivers it once.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client submits jobs to one ingest endpoint as one tenant. It is safe for
// concurrent use.
type Client struct {
	base string
	key  string
	cfg  config
}

type config struct {
	http          *http.Client
	maxTries      int
	backoffBase   time.Duration
	backoffCap    time.Duration
	maxRetryAfter time.Duration
	sleep         func(context.Context, time.Duration) error
}

// Option changes a Client's defaults.
type Option func(*config)

// WithHTTPClient sets the HTTP client (default: one with a 30 s timeout).
func WithHTTPClient(c *http.Client) Option { return func(o *config) { o.http = c } }

// WithMaxTries bounds the tries of one call, the first included (default 5).
func WithMaxTries(n int) Option { return func(o *config) { o.maxTries = max(1, n) } }

// WithBackoff sets the backoff used when the server gives no Retry-After:
// try k (from 0) waits a uniformly random time in [0, min(cap, base·2^k)]
// ("full jitter"). Defaults: base 200 ms, cap 30 s.
func WithBackoff(base, cap time.Duration) Option {
	return func(o *config) { o.backoffBase, o.backoffCap = base, cap }
}

// WithMaxRetryAfter sets the longest Retry-After the client will wait out
// (default 60 s); a longer one ends the call at once with the *Error, whose
// RetryAfter tells the caller when to come back.
func WithMaxRetryAfter(d time.Duration) Option { return func(o *config) { o.maxRetryAfter = d } }

// New returns a client of the ingest at baseURL (e.g. "http://127.0.0.1:8080")
// authenticating with the tenant's API key.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), key: apiKey, cfg: config{
		http:          &http.Client{Timeout: 30 * time.Second},
		maxTries:      5,
		backoffBase:   200 * time.Millisecond,
		backoffCap:    30 * time.Second,
		maxRetryAfter: time.Minute,
		sleep:         sleepCtx,
	}}
	for _, o := range opts {
		o(&c.cfg)
	}
	return c
}

// Job is one job to submit.
type Job struct {
	// ID is the client's job id, used by the server to deduplicate for 24 h.
	// Submit fills it with a random id when empty.
	ID string `json:"id,omitempty"`
	// Type is the job type (required).
	Type string `json:"type"`
	// Payload is passed to the tenant's downstream unchanged.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Cost is how many units of the tenant's limits the job uses (default 1).
	Cost int64 `json:"cost,omitempty"`
	// Deadline, when set, is when the job stops being worth delivering.
	Deadline *time.Time `json:"deadline,omitempty"`
	// NotBefore or Delay (not both) schedule the job: it is not delivered
	// before NotBefore, or Delay from the server's now (a Go duration in
	// the request). At most the server's ingest.max_delay ahead.
	NotBefore *time.Time    `json:"not_before,omitempty"`
	Delay     time.Duration `json:"-"`
	// Heartbeat, when > 0, makes it a heartbeat job: it is dropped unsent
	// unless polled (Job, Heartbeat) at least this often. 1s to 24h.
	Heartbeat time.Duration `json:"-"`
}

// Accepted is the server's answer to an admitted job: it is durably queued.
type Accepted struct {
	JobID      string    `json:"job_id"`
	Tenant     string    `json:"tenant"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	// DueAt is a scheduled job's due time (nil for an ordinary job).
	DueAt *time.Time `json:"due_at,omitempty"`
}

// Error is a non-2xx answer. Type, Title and Detail come from the server's
// application/problem+json body; Field names the offending request field of
// a 400 or 422.
type Error struct {
	Status     int           `json:"status"`
	Type       string        `json:"type"`
	Title      string        `json:"title"`
	Detail     string        `json:"detail"`
	Field      string        `json:"field,omitempty"`
	RetryAfter time.Duration `json:"-"`
	// Tries is how many requests the call made.
	Tries int `json:"-"`
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("sluice: %d %s", e.Status, e.Title)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

// Temporary reports whether the same request may succeed later: 429, 503,
// and a 409 with Retry-After (another request holds the job's id: a
// concurrent submission, or one whose ingest died mid-way, whose hold
// expires within a minute). A 409 without Retry-After (a job that is not a
// heartbeat job, a cancelled one) is final.
func (e *Error) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable ||
		(e.Status == http.StatusConflict && e.RetryAfter > 0)
}

// Submit submits one job, retrying 429 and 503 answers and connection errors
// as described on the package.
func (c *Client) Submit(ctx context.Context, job Job) (Accepted, error) {
	if job.ID == "" {
		job.ID = newID()
	}
	var acc Accepted
	err := c.do(ctx, http.MethodPost, "/v1/jobs", job, &acc)
	return acc, err
}

// SubmitBatch submits jobs as one request of cost N (the sum of their
// costs), admitted or refused as a whole.
func (c *Client) SubmitBatch(ctx context.Context, jobs []Job) ([]Accepted, error) {
	for i := range jobs {
		if jobs[i].ID == "" {
			jobs[i].ID = newID()
		}
	}
	var out struct {
		Jobs []Accepted `json:"jobs"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/jobs:batch", map[string]any{"jobs": jobs}, &out)
	return out.Jobs, err
}

// do sends in as a JSON body (none when in is nil) until the request
// succeeds, fails for good, or runs out of tries, and decodes a 2xx body
// into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("sluice: encode request: %w", err)
		}
	}
	_, err := c.call(ctx, method, path, "application/json", body, out)
	return err
}

// call sends body (none when nil) with contentType until the request
// succeeds, fails for good, or runs out of tries; it decodes a 2xx body
// other than a 204 into out (when not nil) and returns the 2xx status.
func (c *Client) call(ctx context.Context, method, path, contentType string, body []byte, out any) (int, error) {
	for try := 0; ; try++ {
		resp, err := c.send(ctx, method, path, contentType, body)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil || try+1 >= c.cfg.maxTries {
				return 0, fmt.Errorf("sluice: %s %s after %d tries: %w", method, path, try+1, err)
			}
			wait = c.backoff(try)
		case resp.StatusCode/100 == 2:
			defer resp.Body.Close()
			if out == nil || resp.StatusCode == http.StatusNoContent {
				return resp.StatusCode, nil
			}
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				return 0, fmt.Errorf("sluice: decode %s answer: %w", path, err)
			}
			return resp.StatusCode, nil
		default:
			apiErr := readError(resp)
			apiErr.Tries = try + 1
			if !apiErr.Temporary() || try+1 >= c.cfg.maxTries || apiErr.RetryAfter > c.cfg.maxRetryAfter {
				return 0, apiErr
			}
			wait = apiErr.RetryAfter
			if wait <= 0 {
				wait = c.backoff(try)
			}
		}
		if err := c.cfg.sleep(ctx, wait); err != nil {
			return 0, fmt.Errorf("sluice: %s %s: %w", method, path, err)
		}
	}
}

func (c *Client) send(ctx context.Context, method, path, contentType string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	return c.cfg.http.Do(req)
}

// backoff returns the full-jitter wait before try+1: uniform in
// [0, min(cap, base·2^try)].
func (c *Client) backoff(try int) time.Duration {
	ceil := c.cfg.backoffCap
	if try < 32 && c.cfg.backoffBase<<try > 0 && c.cfg.backoffBase<<try < ceil {
		ceil = c.cfg.backoffBase << try
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(ceil)+1))
	if err != nil {
		return ceil
	}
	return time.Duration(n.Int64())
}

// readError decodes a problem+json answer; a body that is not one still
// gives an Error with the status.
func readError(resp *http.Response) *Error {
	defer resp.Body.Close()
	e := &Error{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(b, e)
	e.Status = resp.StatusCode
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// newID returns a random 128-bit job id in hex.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
