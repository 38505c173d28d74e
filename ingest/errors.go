package ingest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// problemJSON is the media type of every error answer (RFC 9457).
const problemJSON = "application/problem+json"

// quotaExceeded is the problem type of a 429, from the IANA HTTP Problem
// Types registry that draft-ietf-httpapi-ratelimit-headers-11 fills.
const quotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// problem is an RFC 9457 problem details object with sluice's extension
// members. Every error answer of ingest is one, so a client parses a single
// shape: Type and Title say what kind of error, Detail says it in a sentence,
// and Field names the offending request field ("cost", "jobs[3].deadline").
type problem struct {
	// Type is a URI; "about:blank" means the status code says it all.
	Type string `json:"type"`
	// Title is the HTTP status text for about:blank, or the problem's name.
	Title string `json:"title"`
	// Status repeats the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence.
	Detail string `json:"detail"`
	// Field names the request field at fault, when one is.
	Field string `json:"field,omitempty"`
	// Limit is the limit a 413 exceeded (bytes or jobs).
	Limit int64 `json:"limit,omitempty"`
	// Tenant is the authenticated tenant, when known.
	Tenant string `json:"tenant,omitempty"`
	// ViolatedPolicies names the policies that refused a 429 (draft-11).
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
	// RetryAfter repeats the Retry-After header in seconds (429 and 503).
	RetryAfter int64 `json:"retry_after,omitempty"`
	// Backlog is the tenant's queued units when the backlog gate refused.
	Backlog int64 `json:"backlog,omitempty"`
	// Backend names what is down on a 503: "redis" or "kafka".
	Backend string `json:"backend,omitempty"`
	// err is the cause the client is not told (a connection error that
	// names socket addresses); the handler logs it.
	err error
	// unknown marks a 503 whose enqueue outcome is unknown
	// (queue.ErrUnknownOutcome): the ids are kept, not released.
	unknown bool
}

// newProblem returns an about:blank problem for status.
func newProblem(status int, field, detail string) *problem {
	return &problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Field: field, Detail: detail}
}

// writeProblem writes p as the answer. A problem carrying RetryAfter also sets
// the Retry-After header (integer seconds).
func writeProblem(w http.ResponseWriter, p *problem) {
	h := w.Header()
	h.Set("Content-Type", problemJSON)
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(p.RetryAfter, 10))
	}
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="sluice"`)
	}
	b, err := json.Marshal(p)
	if err != nil {
		// A problem holds strings and integers only; Marshal cannot fail.
		b = []byte(`{"type":"about:blank","status":500}`)
	}
	b = append(b, '\n')
	// A Content-Length lets an answer given before the body is read be
	// complete on the wire at once (linger.go).
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}

// writeJSON writes v as an application/json answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, newProblem(http.StatusInternalServerError, "", "encode answer"))
		return
	}
	writeRawJSON(w, status, b)
}

// writeRawJSON writes already encoded JSON with status.
func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	b = append(b, '\n')
	h := w.Header()
	v := []string{"application/json", strconv.Itoa(len(b))} // one backing array for both
	h["Content-Type"], h["Content-Length"] = v[0:1:1], v[1:2:2]
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// retryAfterSeconds turns d into a Retry-After value: whole seconds, rounded
// up, at least 1 (RFC 9110 §10.2.3 takes integers; 0 would invite an
// immediate retry that is refused again).
func retryAfterSeconds(d time.Duration) int64 {
	return max(1, ceilSeconds(d))
}

// ceilSeconds is d in whole seconds, rounded up, without overflow for any
// d; negative d gives 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
