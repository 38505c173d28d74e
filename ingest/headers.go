package ingest

import (
	"net/http"
	"strconv"
	"strings"

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
func setPolicyHeader(h http.Header, ts *tenantState, policies []string) {
	switch len(policies) {
	case 0:
		return
	case 1: // the common case: no list to join
		h[cRateLimitPolicy] = []string{ts.items[policies[0]]}
		return
	}
	items := make([]string, 0, len(policies))
	for _, name := range policies {
		if it, ok := ts.items[name]; ok {
			items = append(items, it)
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
	var b strings.Builder
	most := 0
	for i, r := range results {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(r.Policy))
		b.WriteString(";r=")
		b.WriteString(strconv.FormatInt(max(0, r.Remaining), 10))
		b.WriteString(";t=")
		b.WriteString(strconv.FormatInt(ceilSeconds(r.ResetAfter), 10))
		if moreRestrictive(r, results[most], violated) {
			most = i
		}
	}
	m := results[most]
	// One backing array for the four values (Header.Set makes one each).
	v := []string{b.String(), strconv.FormatInt(m.Limit, 10), strconv.FormatInt(max(0, m.Remaining), 10),
		strconv.FormatInt(ceilSeconds(m.ResetAfter), 10)}
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
