package drainer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/queue"
)

// bodyKeep is how much of a response body an error keeps (for the DLQ).
const bodyKeep = 2048

// TargetFunc returns the target of a tenant's job type: the job type's when
// it has a URL, else the tenant's; false when there is none.
type TargetFunc func(tenant, jobType string) (config.Target, bool)

// HTTPSink is the Handler that POSTs each job's payload to its target URL
// with the headers
//
//	Content-Type:   application/json
//	Sluice-Job-Id:  the job id (an idempotency key: a job may come twice)
//	Sluice-Attempt: 1 on the first delivery, 2 on the second, ...: one more
//	                on every start of the job, whatever ended the one
//	                before (a failure, a crash, a lost lease, a rebalance)
//	Sluice-Tenant:  the tenant
//	Sluice-Sent-At: when this delivery was sent, RFC 3339 in UTC with
//	                nanoseconds: the moment the outflow slot let it go,
//	                so a downstream can tell the throttle's pacing from
//	                the network's delay (and the benchmarks measure it)
//
// bounded by the target's Timeout (default config.DefaultTargetTimeout).
// It classifies the answer: 2xx is done; 429 or 503 with a Retry-After
// (seconds or an HTTP date) is a *RetryAfterError; other 5xx, 429/503
// without Retry-After, connection errors and timeouts are retryable; other
// statuses are a *PermanentError.
// Safe for concurrent use.
type HTTPSink struct {
	// rt sends the requests: the sink's own transport when NewHTTPSink got
	// no client (a request then skips http.Client's per-request work: a
	// copy of its headers kept for redirects, which the sink never
	// follows: a 3xx is its answer), else the caller's client.
	rt      http.RoundTripper
	targets TargetFunc
	clock   clock.Clock
}

// NewHTTPSink returns a sink sending with client (nil: its own pooled
// transport, at most 256 idle connections per host and no total idle
// limit, no redirects followed) to the targets. A client of your
// own should not set Transport.MaxIdleConns below the deliveries in flight:
// see the comment in NewHTTPSink.
func NewHTTPSink(client *http.Client, targets TargetFunc) *HTTPSink {
	var rt http.RoundTripper = clientRoundTripper{client}
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256
		// No total idle limit (DefaultTransport's is 100). Over that limit
		// the transport closes its oldest idle connection, and a connection
		// answered without a body (a 204) is put back idle before its
		// answer reaches the caller: closing it then fails a request the
		// downstream has already taken, and its retry was a duplicate
		// delivery whenever more than 100 deliveries were in flight (seen
		// in drainbench's 12-tenant HTTP rows). Idle connections are still
		// bounded per host and closed after IdleConnTimeout.
		tr.MaxIdleConns = 0
		rt = tr
	}
	return &HTTPSink{rt: rt, targets: targets, clock: clock.Real}
}

// clientRoundTripper sends through an http.Client (its redirects, jar and
// timeout), for a client the caller gave.
type clientRoundTripper struct{ c *http.Client }

func (c clientRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return c.c.Do(req) }

// Handle delivers job with one POST.
func (s *HTTPSink) Handle(ctx context.Context, job queue.Envelope) error {
	tg, ok := s.targets(job.Tenant, job.Type)
	if !ok || tg.URL == "" {
		return Permanent(fmt.Errorf("no target url for tenant %q type %q", job.Tenant, job.Type))
	}
	timeout := tg.Timeout
	if timeout <= 0 {
		timeout = config.DefaultTargetTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.URL, bytes.NewReader(job.Payload))
	if err != nil {
		return Permanent(fmt.Errorf("build request for %s: %w", tg.URL, err))
	}
	if u := req.URL.User; u != nil {
		// As http.Client does: credentials in the target URL are sent as
		// Basic auth (the transport alone would drop them).
		pw, _ := u.Password()
		req.SetBasicAuth(u.Username(), pw)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sluice-Job-Id", job.ID)
	req.Header.Set("Sluice-Attempt", strconv.Itoa(job.Attempt+1))
	req.Header.Set("Sluice-Tenant", job.Tenant)
	req.Header.Set("Sluice-Sent-At", s.clock.Now().UTC().Format(time.RFC3339Nano))
	resp, err := s.rt.RoundTrip(req)
	if err != nil {
		var ue *url.Error
		if !errors.As(err, &ue) { // as http.Client words it: Post "url": ..., password redacted
			err = &url.Error{Op: "Post", URL: req.URL.Redacted(), Err: err}
		}
		return fmt.Errorf("drainer: post job %s: %w", job.ID, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, bodyKeep))
	// Drain a little more so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return s.classify(resp, string(body))
}

func (s *HTTPSink) classify(resp *http.Response, body string) error {
	st := resp.StatusCode
	switch {
	case st >= 200 && st < 300:
		return nil
	case st == http.StatusTooManyRequests || st == http.StatusServiceUnavailable:
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), s.clock.Now()); ok {
			return &RetryAfterError{After: d, Status: st, Body: body}
		}
		return &StatusError{Status: st, Body: body}
	case st >= 500:
		return &StatusError{Status: st, Body: body}
	default:
		return &PermanentError{Err: errors.New(resp.Status), Status: st, Body: body}
	}
}

// maxRetryAfter caps a Retry-After, so a bogus far-future date cannot park
// a job for years.
const maxRetryAfter = time.Hour

// ParseRetryAfter parses a Retry-After value: delay-seconds ("120") or an
// HTTP date, relative to now; a date in the past is 0. The result is capped
// at one hour. ok is false when v is empty or malformed.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), true
}
