package ingest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/limits"
)

// Header names of the limit state.
const (
	hRateLimitPolicy = "RateLimit-Policy"
	hRateLimit       = "RateLimit"
	hXLimit          = "X-RateLimit-Limit"
	hXRemaining      = "X-RateLimit-Remaining"
	hXReset          = "X-RateLimit-Reset"
	hRetryAfter      = "Retry-After"
)

// The same names in the canonical form http.Header keys hold, for setting
// them without Header.Set's canonicalization (an allocation each on every
// answer: these names are not canonical as spelled).
var (
	cRateLimitPolicy = http.CanonicalHeaderKey(hRateLimitPolicy)
	cRateLimit       = http.CanonicalHeaderKey(hRateLimit)
	cXLimit          = http.CanonicalHeaderKey(hXLimit)
	cXRemaining      = http.CanonicalHeaderKey(hXRemaining)
	cXReset          = http.CanonicalHeaderKey(hXReset)
)

// setPolicyHeader sets RateLimit-Policy to the policies of a request, in
// order: every policy is a list member "name";q=<limit>;w=<seconds>
// (draft-ietf-httpapi-ratelimit-headers-11 §4), for example
//
//	RateLimit-Policy: "tenant";q=10;w=1, "type.encode";q=2;w=60
//
// It needs only the configuration, so every authenticated answer has it,
// also when the request failed before admission.
func setPolicyHeader(h http.Header, ts *tenantState, policies []limits.Policy) {
	switch len(policies) {
	case 0:
		return
	case 1: // the common case: no list to join, the tenant's value shared
		if v, ok := ts.items[policies[0].Name]; ok {
			h[cRateLimitPolicy] = v
		}
		return
	}
	items := make([]string, 0, len(policies))
	for _, p := range policies {
		if it, ok := ts.items[p.Name]; ok {
			items = append(items, it[0])
		}
	}
	h[cRateLimitPolicy] = []string{strings.Join(items, ", ")}
}

// setStateHeaders sets the limit state that an admission decision returned:
//
//   - RateLimit lists every policy of the request with its remaining quota r
//     and the seconds t until the quota is fully back (ResetAfter, rounded
//     up): "tenant";r=3;t=1, "type.encode";r=0;t=30. All policies are listed,
//     not only the nearest to exhaustion, because a client sending several
//     job types needs each type's state and the draft allows a list.
//   - X-RateLimit-Limit, -Remaining and -Reset describe one policy, the most
//     restrictive: the violated one on a 429, otherwise the one with the
//     least remaining quota (ties: the later reset). Reset is seconds until
//     the quota is back, rounded up, as throttled and Envoy send it (not an
//     epoch time as GitHub does).
func setStateHeaders(h http.Header, results []limits.Result, violated string) {
	if len(results) == 0 {
		return
	}
	// One byte buffer and one string for the four values, sliced (Header.Set
	// and a strings.Builder would make one each).
	var buf [256]byte
	b := buf[:0]
	most := 0
	for i, r := range results {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendQuote(b, r.Policy)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, max(0, r.Remaining), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(r.ResetAfter), 10)
		if moreRestrictive(r, results[most], violated) {
			most = i
		}
	}
	m := results[most]
	var end [4]int
	end[0] = len(b)
	b = strconv.AppendInt(b, m.Limit, 10)
	end[1] = len(b)
	b = strconv.AppendInt(b, max(0, m.Remaining), 10)
	end[2] = len(b)
	b = strconv.AppendInt(b, ceilSeconds(m.ResetAfter), 10)
	end[3] = len(b)
	all := string(b)
	v := []string{all[:end[0]], all[end[0]:end[1]], all[end[1]:end[2]], all[end[2]:end[3]]}
	h[cRateLimit], h[cXLimit], h[cXRemaining], h[cXReset] = v[0:1:1], v[1:2:2], v[2:3:3], v[3:4:4]
}

// moreRestrictive reports whether a should be reported instead of b.
func moreRestrictive(a, b limits.Result, violated string) bool {
	if violated != "" && (a.Policy == violated) != (b.Policy == violated) {
		return a.Policy == violated
	}
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return a.ResetAfter > b.ResetAfter
}

// withBacklog returns results with the backlog gate's state after them, for
// a 429 of the gate: "backlog" with limit max_backlog, remaining
// max_backlog − backlog (less than the request's cost) and reset the 429's
// Retry-After (retryAfter s, the wait for the queued units to leave), and
// adds "backlog";q=<max_backlog> to RateLimit-Policy. Without it the
// answer listed only the admission policies, whose quota the refusal left
// untouched: RateLimit said r=95 on a 429 a client should not resend at
// once.
func withBacklog(h http.Header, results []limits.Result, maxBacklog, backlog, retryAfter int64) []limits.Result {
	item := "\"" + limits.ViolatedBacklog + "\";q=" + strconv.FormatInt(maxBacklog, 10)
	if cur := h[cRateLimitPolicy]; len(cur) == 1 {
		item = cur[0] + ", " + item
	}
	h[cRateLimitPolicy] = []string{item}
	left := maxBacklog // compared, not subtracted, until it cannot wrap
	switch {
	case backlog >= maxBacklog:
		left = 0
	case backlog > 0:
		left = maxBacklog - backlog
	}
	out := make([]limits.Result, 0, len(results)+1)
	out = append(out, results...)
	return append(out, limits.Result{
		Policy: limits.ViolatedBacklog, Limit: maxBacklog, Remaining: left,
		ResetAfter: time.Duration(retryAfter) * time.Second,
	})
}
