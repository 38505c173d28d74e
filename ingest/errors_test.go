package ingest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestErrorAnswers checks every client error: its status, that the body is
// problem+json naming the field at fault, and the headers that go with it.
func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "err")
	cfg := testConfig(t, tenantYAML(tenant, "    admission: {algorithm: fixed_window, limit: 100, period: 1s}\n"))
	h := startIngest(t, cfg, deps{rdb: rdb})
	key := apiKey(tenant)
	const ct = "application/json"
	big := `{"type":"t","payload":"` + strings.Repeat("x", 2048) + `"}`
	six := `{"jobs":[` + strings.TrimSuffix(strings.Repeat(`{"type":"t"},`, 6), ",") + `]}`

	tests := []struct {
		name, method, path, key, ct, body string
		wantStatus                        int
		wantField                         string
		wantDetail                        string // a substring of detail
	}{
		{"no Authorization", "POST", "/v1/jobs", "", ct, `{"type":"t"}`, 401, "Authorization", "Bearer"},
		{"unknown key", "POST", "/v1/jobs", "nope", ct, `{"type":"t"}`, 401, "Authorization", "unknown API key"},
		{"no Content-Type", "POST", "/v1/jobs", key, "", `{"type":"t"}`, 415, "Content-Type", "application/json"},
		{"wrong Content-Type", "POST", "/v1/jobs", key, "text/plain", `{"type":"t"}`, 415, "Content-Type", "text/plain"},
		{"charset is fine but JSON is cut", "POST", "/v1/jobs", key, "application/json; charset=utf-8", `{"type":`, 400, "", "unexpected end"},
		{"malformed JSON", "POST", "/v1/jobs", key, ct, `{"type" "t"}`, 400, "", "malformed JSON"},
		{"empty body", "POST", "/v1/jobs", key, ct, ``, 400, "", "empty"},
		{"not an object", "POST", "/v1/jobs", key, ct, `[1]`, 400, "", "must be a JSON object"},
		{"two Authorization headers", "POST", "/v1/jobs", key + "\n" + apiKey("other"), ct, `{"type":"t"}`, 401, "Authorization", "repeated"},
		{"null body", "POST", "/v1/jobs", key, ct, ` null `, 400, "", "must be a JSON object (got null)"},
		{"jobs not an array", "POST", "/v1/jobs:batch", key, ct, `{"jobs":"x"}`, 400, "jobs", "must be an array"},
		{"trailing data", "POST", "/v1/jobs", key, ct, `{"type":"t"} {}`, 400, "", "nothing after it"},
		{"unknown field", "POST", "/v1/jobs", key, ct, `{"type":"t","dedline":"x"}`, 400, "dedline", "unknown field"},
		{"cost is a string", "POST", "/v1/jobs", key, ct, `{"type":"t","cost":"2"}`, 400, "cost", "an integer"},
		{"cost is fractional", "POST", "/v1/jobs", key, ct, `{"type":"t","cost":1.5}`, 400, "cost", "an integer"},
		{"deadline not RFC 3339", "POST", "/v1/jobs", key, ct, `{"type":"t","deadline":"tomorrow"}`, 400, "deadline", "RFC 3339"},
		{"body over the limit", "POST", "/v1/jobs", key, ct, big, 413, "", "2048 bytes"},
		{"type missing", "POST", "/v1/jobs", key, ct, `{"payload":{}}`, 422, "type", "required"},
		{"type invalid", "POST", "/v1/jobs", key, ct, `{"type":"a b"}`, 422, "type", "[A-Za-z0-9._:-]"},
		{"id invalid", "POST", "/v1/jobs", key, ct, `{"type":"t","id":"a/b"}`, 422, "id", "[A-Za-z0-9._:-]"},
		{"cost zero", "POST", "/v1/jobs", key, ct, `{"type":"t","cost":0}`, 422, "cost", ">= 1"},
		{"cost negative", "POST", "/v1/jobs", key, ct, `{"type":"t","cost":-3}`, 422, "cost", ">= 1"},
		{"deadline in the past", "POST", "/v1/jobs", key, ct, `{"type":"t","deadline":"2001-01-01T00:00:00Z"}`, 422, "deadline", "in the past"},
		{"cost above capacity", "POST", "/v1/jobs", key, ct, `{"type":"t","cost":101}`, 422, "cost", "never be admitted"},
		{"batch: jobs missing", "POST", "/v1/jobs:batch", key, ct, `{}`, 422, "jobs", "non-empty"},
		{"batch: jobs empty", "POST", "/v1/jobs:batch", key, ct, `{"jobs":[]}`, 422, "jobs", "non-empty"},
		{"batch: too many jobs", "POST", "/v1/jobs:batch", key, ct, six, 413, "jobs", "limit of 5"},
		{"batch: unknown top field", "POST", "/v1/jobs:batch", key, ct, `{"job":[]}`, 400, "job", "unknown field"},
		{"batch: element not an object", "POST", "/v1/jobs:batch", key, ct, `{"jobs":[{"type":"t"},7]}`, 400, "jobs[1]", "must be a JSON object"},
		{"batch: element unknown field", "POST", "/v1/jobs:batch", key, ct, `{"jobs":[{"type":"t"},{"type":"t"},{"type":"t","foo":1}]}`, 400, "jobs[2].foo", "unknown field"},
		{"batch: element cost string", "POST", "/v1/jobs:batch", key, ct, `{"jobs":[{"type":"t","cost":"x"}]}`, 400, "jobs[0].cost", "an integer"},
		{"batch: element cost zero", "POST", "/v1/jobs:batch", key, ct, `{"jobs":[{"type":"t"},{"type":"t","cost":0}]}`, 422, "jobs[1].cost", ">= 1"},
		{"batch: element deadline past", "POST", "/v1/jobs:batch", key, ct, `{"jobs":[{"type":"t","deadline":"2001-01-01T00:00:00Z"}]}`, 422, "jobs[0].deadline", "in the past"},
		{"batch: duplicate id", "POST", "/v1/jobs:batch", key, ct, `{"jobs":[{"type":"t","id":"a"},{"type":"t","id":"a"}]}`, 422, "jobs[1].id", "repeats the id of jobs[0].id"},
		{"batch: total cost above capacity", "POST", "/v1/jobs:batch", key, ct, `{"jobs":[{"type":"t","cost":60},{"type":"t","cost":41}]}`, 422, "jobs[1].cost", "cost 101"},
		{"wrong method", "PUT", "/v1/jobs", key, "", ``, 405, "", "use GET or POST"},
		{"unknown route", "POST", "/v2/jobs", key, ct, `{}`, 404, "", "no route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := h.request(t, tt.method, tt.path, tt.key, tt.ct, tt.body)
			if a.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", a.status, tt.wantStatus, a.body)
			}
			if got := a.header.Get("Content-Type"); got != "application/problem+json" {
				t.Errorf("Content-Type = %q, want application/problem+json", got)
			}
			p := a.json(t)
			got := map[string]any{"status": p["status"], "field": p["field"]}
			want := map[string]any{"status": float64(tt.wantStatus), "field": nilIfEmpty(tt.wantField)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("problem (-want +got):\n%s\nbody %s", diff, a.body)
			}
			if d, _ := p["detail"].(string); !strings.Contains(d, tt.wantDetail) {
				t.Errorf("detail = %q, want it to contain %q", d, tt.wantDetail)
			}
			authenticated := tt.wantStatus != 401 && tt.wantStatus != 404 && tt.wantStatus != 405
			if authenticated {
				if p["tenant"] != tenant {
					t.Errorf("tenant = %v, want %s", p["tenant"], tenant)
				}
				if got, want := a.header.Get("RateLimit-Policy"), `"tenant";q=100;w=1`; got != want {
					t.Errorf("RateLimit-Policy = %q, want %q", got, want)
				}
			}
			if tt.wantStatus == 401 {
				if got := a.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate = %q, want Bearer", got)
				}
				if _, ok := p["tenant"]; ok {
					t.Errorf("a 401 names a tenant: %s", a.body)
				}
			}
			if tt.wantStatus == 413 {
				want := float64(2048)
				if tt.wantField == "jobs" {
					want = 5
				}
				if p["limit"] != want {
					t.Errorf("limit = %v, want %v", p["limit"], want)
				}
			}
		})
	}
	if n := len(queued(t, rdb, tenant)); n != 0 {
		t.Errorf("%d jobs queued by refused requests, want 0", n)
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TestUnauthenticatedAnswersAreAlike checks that a wrong key and a missing
// header answer alike apart from the detail, so nothing tells a tenant that
// exists from one that does not.
func TestUnauthenticatedAnswersAreAlike(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "auth")
	h := startIngest(t, testConfig(t, tenantYAML(tenant, "")), deps{rdb: rdb})
	for _, key := range []string{"key-" + tenant + "x", "key-nosuchtenant", fmt.Sprintf("%s ", apiKey(tenant)+"0")} {
		a := h.request(t, http.MethodPost, "/v1/jobs", key, "application/json", `{"type":"t"}`)
		if a.status != http.StatusUnauthorized {
			t.Errorf("key %q: status %d, want 401", key, a.status)
		}
		if a.header.Get("RateLimit-Policy") != "" || a.header.Get("RateLimit") != "" {
			t.Errorf("key %q: a 401 carries limit headers: %v", key, a.header)
		}
	}
}
