package ingest_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
)

// limitHeaders picks the limit-state headers of an answer.
func limitHeaders(a answer) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if v := a.header.Get(k); v != "" {
			out[k] = v
		}
	}
	return out
}

// TestGCRAHeadersExact drives a GCRA tenant (2 per second, burst 3: T =
// 500ms, τ = 1.5s) at a fixed instant and checks every header of three 202s
// and the 429 that follows, and that the 202s' jobs are on the Redis list.
func TestGCRAHeadersExact(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	clock := newFixedClock()
	tenant := testenv.Name(t, "gcra")
	cfg := testConfig(t, tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 2, period: 1s, burst: 3}\n"))
	h := startIngest(t, cfg, deps{rdb: rdb, clock: clock})
	const policy = `"tenant";q=2;w=1;sluice-burst=3`

	// Each 202 moves TAT on by T = 500ms: remaining = ⌊(τ − (TAT − now)) / T⌋
	// and the reset is TAT − now, rounded up to whole seconds.
	steps := []struct{ remaining, reset string }{{"2", "1"}, {"1", "1"}, {"0", "2"}}
	var ids []string
	for i, st := range steps {
		body := `{"type":"email","payload":{"to":"a@example.com","n":` + string(rune('0'+i)) + `},"cost":1,"deadline":"2030-01-02T04:00:00Z"}`
		a := h.post(t, tenant, "/v1/jobs", body)
		if a.status != http.StatusAccepted {
			t.Fatalf("job %d: status %d, want 202: %s", i, a.status, a.body)
		}
		want := map[string]string{
			"RateLimit-Policy":      policy,
			"RateLimit":             `"tenant";r=` + st.remaining + ";t=" + st.reset,
			"X-RateLimit-Limit":     "3",
			"X-RateLimit-Remaining": st.remaining,
			"X-RateLimit-Reset":     st.reset,
		}
		if diff := cmp.Diff(want, limitHeaders(a)); diff != "" {
			t.Errorf("job %d: headers (-want +got):\n%s", i, diff)
		}
		var got struct {
			JobID      string    `json:"job_id"`
			Tenant     string    `json:"tenant"`
			EnqueuedAt time.Time `json:"enqueued_at"`
		}
		if err := json.Unmarshal(a.body, &got); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(got.JobID) || got.Tenant != tenant || !got.EnqueuedAt.Equal(clock.Now()) {
			t.Errorf("job %d: answer %s, want a 32-hex job_id, tenant %s, enqueued_at %s", i, a.body, tenant, clock.Now())
		}
		ids = append(ids, got.JobID)
	}

	a := h.post(t, tenant, "/v1/jobs", `{"type":"email"}`)
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("4th job: status %d, want 429: %s", a.status, a.body)
	}
	// Refused: TAT' would be now + 2s, 0.5s beyond τ, so Retry-After is 1.
	want := map[string]string{
		"RateLimit-Policy":      policy,
		"RateLimit":             `"tenant";r=0;t=2`,
		"X-RateLimit-Limit":     "3",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "2",
		"Retry-After":           "1",
	}
	if diff := cmp.Diff(want, limitHeaders(a)); diff != "" {
		t.Errorf("429 headers (-want +got):\n%s", diff)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("429 Content-Type = %q", ct)
	}
	p := a.json(t)
	delete(p, "detail")
	wantBody := map[string]any{
		"type":              "https://iana.org/assignments/http-problem-types#quota-exceeded",
		"title":             "Quota exceeded",
		"status":            float64(429),
		"tenant":            tenant,
		"violated-policies": []any{"tenant"},
		"retry_after":       float64(1),
	}
	if diff := cmp.Diff(wantBody, p); diff != "" {
		t.Errorf("429 body (-want +got):\n%s", diff)
	}

	// Durable: the three jobs are on the list, in order, as sent.
	jobs := queued(t, rdb, tenant)
	if len(jobs) != 3 {
		t.Fatalf("%d jobs queued, want 3", len(jobs))
	}
	deadline := time.Date(2030, 1, 2, 4, 0, 0, 0, time.UTC)
	for i, e := range jobs {
		want := queue.Envelope{
			Version: queue.EnvelopeVersion, ID: ids[i], Tenant: tenant, Type: "email",
			Payload: json.RawMessage(`{"to":"a@example.com","n":` + string(rune('0'+i)) + `}`),
			Cost:    1, EnqueuedAt: clock.Now(), Deadline: &deadline,
		}
		if diff := cmp.Diff(want, e); diff != "" {
			t.Errorf("queued job %d (-want +got):\n%s", i, diff)
		}
	}

	// After T the bucket has room for one again.
	clock.Advance(500 * time.Millisecond)
	if a := h.post(t, tenant, "/v1/jobs", `{"type":"email"}`); a.status != http.StatusAccepted {
		t.Errorf("after 500ms: status %d, want 202: %s", a.status, a.body)
	}
}

// TestTypePolicies checks that a job of a configured type passes the
// tenant's and the type's policy and that the headers list both.
func TestTypePolicies(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	clock := newFixedClock()
	tenant := testenv.Name(t, "types")
	cfg := testConfig(t, tenantYAML(tenant, `    admission: {algorithm: gcra, limit: 10, period: 1s}
    job_types:
      encode:
        admission: {algorithm: gcra, limit: 2, period: 1m}
`))
	h := startIngest(t, cfg, deps{rdb: rdb, clock: clock})

	// T = 100ms for the tenant, 30s for encode.
	a := h.post(t, tenant, "/v1/jobs", `{"type":"encode"}`)
	want := map[string]string{
		"RateLimit-Policy":      `"tenant";q=10;w=1, "type.encode";q=2;w=60`,
		"RateLimit":             `"tenant";r=9;t=1, "type.encode";r=1;t=30`,
		"X-RateLimit-Limit":     "2",
		"X-RateLimit-Remaining": "1",
		"X-RateLimit-Reset":     "30",
	}
	if diff := cmp.Diff(want, limitHeaders(a)); a.status != 202 || diff != "" {
		t.Fatalf("encode job: status %d, headers (-want +got):\n%s", a.status, diff)
	}
	if a := h.post(t, tenant, "/v1/jobs", `{"type":"encode"}`); a.status != 202 {
		t.Fatalf("2nd encode job: status %d: %s", a.status, a.body)
	}
	a = h.post(t, tenant, "/v1/jobs", `{"type":"encode"}`)
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("3rd encode job: status %d, want 429: %s", a.status, a.body)
	}
	if got := a.json(t)["violated-policies"]; !cmp.Equal(got, []any{"type.encode"}) {
		t.Errorf("violated-policies = %v, want [type.encode]", got)
	}
	if got := a.header.Get("Retry-After"); got != "30" {
		t.Errorf("Retry-After = %q, want 30 (T of encode)", got)
	}
	// Another type is limited by the tenant policy only; the refused encode
	// job took nothing from the tenant (all or nothing).
	a = h.post(t, tenant, "/v1/jobs", `{"type":"email"}`)
	if diff := cmp.Diff(`"tenant";r=7;t=1`, a.header.Get("RateLimit")); a.status != 202 || diff != "" {
		t.Errorf("email job: status %d, RateLimit (-want +got):\n%s", a.status, diff)
	}
	if got := a.header.Get("RateLimit-Policy"); got != `"tenant";q=10;w=1` {
		t.Errorf("email job: RateLimit-Policy = %q", got)
	}
}

// TestMixedBatchChargesTypesTheirOwnJobs: in a batch mixing job types, the
// tenant policy is charged the whole batch and each type's policy only its
// own jobs.
func TestMixedBatchChargesTypesTheirOwnJobs(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "mixed")
	cfg := testConfig(t, tenantYAML(tenant, `    admission: {algorithm: fixed_window, limit: 10, period: 1m}
    job_types:
      encode:
        admission: {algorithm: fixed_window, limit: 2, period: 1m}
`))
	h := startIngest(t, cfg, deps{rdb: rdb, clock: newFixedClock()})

	// The fixed clock stands 5 s into a minute: windows reset in 55 s.
	a := h.post(t, tenant, "/v1/jobs:batch", `{"jobs":[{"type":"encode"},{"type":"email"},{"type":"email"},{"type":"email"}]}`)
	if diff := cmp.Diff(`"tenant";r=6;t=55, "type.encode";r=1;t=55`, a.header.Get("RateLimit")); a.status != 202 || diff != "" {
		t.Fatalf("batch of 1 encode + 3 email: status %d, RateLimit (-want +got):\n%s\n%s", a.status, diff, a.body)
	}
	if a := h.post(t, tenant, "/v1/jobs:batch", `{"jobs":[{"type":"encode"},{"type":"email"}]}`); a.status != 202 {
		t.Fatalf("second batch with the last encode unit: status %d: %s", a.status, a.body)
	}
	a = h.post(t, tenant, "/v1/jobs:batch", `{"jobs":[{"type":"encode"},{"type":"email"}]}`)
	if got := a.json(t)["violated-policies"]; a.status != http.StatusTooManyRequests || !cmp.Equal(got, []any{"type.encode"}) {
		t.Fatalf("third encode job: status %d, violated %v, want 429 type.encode", a.status, got)
	}
}

// TestBatchCostsN checks that a batch is admitted as one request whose cost
// is the sum of its jobs' costs, and is refused or queued whole.
func TestBatchCostsN(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	clock := newFixedClock()
	tenant := testenv.Name(t, "batch")
	cfg := testConfig(t, tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 10, period: 1m}\n"))
	h := startIngest(t, cfg, deps{rdb: rdb, clock: clock})

	a := h.post(t, tenant, "/v1/jobs:batch", `{"jobs":[{"type":"a","cost":1},{"type":"b","cost":2},{"type":"a","cost":3,"payload":[1,2]}]}`)
	if a.status != http.StatusAccepted {
		t.Fatalf("batch of cost 6: status %d: %s", a.status, a.body)
	}
	if got := a.header.Get("X-RateLimit-Remaining"); got != "4" {
		t.Errorf("after cost 6 of 10: X-RateLimit-Remaining = %s, want 4", got)
	}
	var got struct {
		Jobs []struct {
			JobID  string `json:"job_id"`
			Tenant string `json:"tenant"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(a.body, &got); err != nil || len(got.Jobs) != 3 {
		t.Fatalf("batch answer %s: want 3 jobs (%v)", a.body, err)
	}
	if a := h.post(t, tenant, "/v1/jobs:batch", `{"jobs":[{"type":"a","cost":2},{"type":"a","cost":3}]}`); a.status != http.StatusTooManyRequests {
		t.Fatalf("batch of cost 5 with 4 left: status %d, want 429: %s", a.status, a.body)
	}
	if a := h.post(t, tenant, "/v1/jobs:batch", `{"jobs":[{"type":"a","cost":4}]}`); a.status != http.StatusAccepted || a.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("batch of cost 4 with 4 left: status %d, remaining %s: %s", a.status, a.header.Get("X-RateLimit-Remaining"), a.body)
	}
	jobs := queued(t, rdb, tenant)
	var ids, types []string
	var costs []int64
	for _, e := range jobs {
		ids, types, costs = append(ids, e.ID), append(types, e.Type), append(costs, e.Cost)
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4}, costs); diff != "" {
		t.Errorf("queued costs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b", "a", "a"}, types); diff != "" {
		t.Errorf("queued types (-want +got):\n%s", diff)
	}
	for i, j := range got.Jobs {
		if j.JobID != ids[i] || j.Tenant != tenant {
			t.Errorf("answer %d = %+v, queued id %s", i, j, ids[i])
		}
	}
	backlog, _ := rdb.Get(t.Context(), "sluice:{"+tenant+"}:backlog").Int64()
	if backlog != 10 {
		t.Errorf("backlog counter = %d, want 10 (cost units)", backlog)
	}
}

// TestSetConfigSwapsTenants replaces the configuration while serving: the
// old tenant's key stops working, the new one's starts, and a changed limit
// applies at once.
func TestSetConfigSwapsTenants(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	clock := newFixedClock()
	oldT, newT := testenv.Name(t, "old"), testenv.Name(t, "new")
	h := startIngest(t, testConfig(t, tenantYAML(oldT, "")), deps{rdb: rdb, clock: clock})
	if a := h.post(t, oldT, "/v1/jobs", `{"type":"t"}`); a.status != 202 {
		t.Fatalf("old tenant before the swap: %d %s", a.status, a.body)
	}
	h.srv.SetConfig(testConfig(t, tenantYAML(newT, "    admission: {algorithm: gcra, limit: 1, period: 1h}\n")))
	if a := h.post(t, oldT, "/v1/jobs", `{"type":"t"}`); a.status != 401 {
		t.Errorf("old tenant after the swap: status %d, want 401", a.status)
	}
	if a := h.post(t, newT, "/v1/jobs", `{"type":"t"}`); a.status != 202 || !strings.Contains(a.header.Get("RateLimit-Policy"), "q=1;w=3600") {
		t.Errorf("new tenant after the swap: status %d, RateLimit-Policy %q", a.status, a.header.Get("RateLimit-Policy"))
	}
	if a := h.post(t, newT, "/v1/jobs", `{"type":"t"}`); a.status != 429 {
		t.Errorf("new tenant's 2nd job within the hour: status %d, want 429", a.status)
	}
}

// TestEveryAuthenticatedAnswerCarriesState checks that answers which admit
// nothing (a 422, a 415, a 413, an idempotent replay) still carry RateLimit
// and X-RateLimit-*, read by a dry run that spends nothing.
func TestEveryAuthenticatedAnswerCarriesState(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "state")
	cfg := testConfig(t, tenantYAML(tenant, "    admission: {algorithm: fixed_window, limit: 10, period: 1m}\n"))
	h := startIngest(t, cfg, deps{rdb: rdb, clock: newFixedClock()})

	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t","id":"job-1"}`); a.status != 202 || a.header.Get("RateLimit") != `"tenant";r=9;t=55` {
		t.Fatalf("first job: status %d, RateLimit %q", a.status, a.header.Get("RateLimit"))
	}
	for _, c := range []struct {
		name, ctype, body string
		status            int
	}{
		{"invalid cost", "application/json", `{"type":"t","cost":-1}`, 422},
		{"wrong content type", "text/plain", `{"type":"t"}`, 415},
		{"malformed json", "application/json", `{"type":`, 400},
		{"body over the limit", "application/json", `{"type":"t","payload":"` + strings.Repeat("x", 4096) + `"}`, 413},
		{"replay", "application/json", `{"type":"t","id":"job-1"}`, 202},
	} {
		a := h.request(t, http.MethodPost, "/v1/jobs", apiKey(tenant), c.ctype, c.body)
		want := map[string]string{
			"RateLimit-Policy":      `"tenant";q=10;w=60`,
			"RateLimit":             `"tenant";r=9;t=55`,
			"X-RateLimit-Limit":     "10",
			"X-RateLimit-Remaining": "9",
			"X-RateLimit-Reset":     "55",
		}
		if diff := cmp.Diff(want, limitHeaders(a)); a.status != c.status || diff != "" {
			t.Errorf("%s: status %d (want %d), headers (-want +got):\n%s", c.name, a.status, c.status, diff)
		}
	}
	if a := h.post(t, tenant, "/v1/jobs", `{"type":"t"}`); a.header.Get("RateLimit") != `"tenant";r=8;t=55` {
		t.Errorf("second job: RateLimit %q, want r=8 (the answers between spent nothing)", a.header.Get("RateLimit"))
	}
}
