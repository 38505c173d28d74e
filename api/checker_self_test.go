package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestCheckerCatchesMismatches feeds the checker answers that break the
// spec in each way it checks, so that TestHandlersMatchSpec passing means
// something.
func TestCheckerCatchesMismatches(t *testing.T) {
	s := loadSpec(t)
	problemJSON := http.Header{"Content-Type": {"application/problem+json"}}
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	accepted := `{"job_id":"j","tenant":"t","enqueued_at":"2030-01-02T03:04:05Z"}`
	for _, tc := range []struct {
		name string
		a    answer
		want string // a substring of the first problem; "" for none
	}{
		{"valid 202", answer{method: "POST", path: "/v1/jobs", status: 202, header: jsonHeader, body: []byte(accepted)}, ""},
		{"undocumented status", answer{method: "POST", path: "/v1/jobs", status: 418, header: problemJSON, body: []byte(`{}`)},
			"status 418 is not documented"},
		{"unknown path", answer{method: "GET", path: "/v9/x", status: 200}, "no such path"},
		{"unknown method", answer{method: "PUT", path: "/healthz", status: 200}, "no PUT operation"},
		{"missing member", answer{method: "POST", path: "/v1/jobs", status: 202, header: jsonHeader,
			body: []byte(`{"job_id":"j","tenant":"t"}`)}, `required member "enqueued_at" is missing`},
		{"wrong type", answer{method: "POST", path: "/v1/jobs", status: 202, header: jsonHeader,
			body: []byte(`{"job_id":1,"tenant":"t","enqueued_at":"2030-01-02T03:04:05Z"}`)}, "body.job_id: type integer, want string"},
		{"bad date-time", answer{method: "POST", path: "/v1/jobs", status: 202, header: jsonHeader,
			body: []byte(`{"job_id":"j","tenant":"t","enqueued_at":"yesterday"}`)}, "not an RFC 3339 date-time"},
		{"wrong media type", answer{method: "POST", path: "/v1/jobs", status: 202, header: http.Header{"Content-Type": {"text/html"}},
			body: []byte(accepted)}, "Content-Type text/html is not documented"},
		{"missing Retry-After", answer{method: "POST", path: "/v1/jobs", status: 429, header: problemJSON,
			body: []byte(`{"type":"x","title":"t","status":429,"detail":"d","tenant":"t","violated-policies":["tenant"],"retry_after":1}`)},
			"required header Retry-After is missing"},
		{"bad header value", answer{method: "POST", path: "/v1/jobs", status: 202,
			header: http.Header{"Content-Type": {"application/json"}, "X-Ratelimit-Remaining": {"-3"}}, body: []byte(accepted)},
			"below the minimum"},
		{"allOf required", answer{method: "POST", path: "/v1/jobs", status: 429,
			header: http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"1"}},
			body:   []byte(`{"type":"x","title":"t","status":429,"detail":"d"}`)}, `required member "violated-policies"`},
		{"enum", answer{method: "GET", path: "/admin/v1/tenants/acme", status: 200,
			header: http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}},
			body:   []byte(`{"id":"acme","source":"elsewhere","spec":{},"version":0}`)}, "is not one of"},
		{"additionalProperties false", answer{method: "GET", path: "/admin/v1/tenants/acme", status: 200,
			header: http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}},
			body:   []byte(`{"id":"acme","source":"config","spec":{"outflw":{}},"version":0}`)}, `member "outflw" is not in the schema`},
		{"nullable", answer{method: "GET", path: "/v1/tenants/acme/stats", status: 200,
			header: http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}},
			body: []byte(`{"tenant":"a","backlog":0,"outflow":{"unlimited":true,"configured_rate":0,"effective_rate":0,"measured_rate":0,"capacity":1},
				"water_level":0,"in_flight":0,"dlq":0,"eta_seconds":null,"paused":false,"admission":{"admitted_rate":0,"refused_rate":0}}`)}, ""},
		{"anyOf none", answer{method: "GET", path: "/admin/v1/tenants/acme/audit", status: 200,
			header: http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}},
			body: []byte(`{"entries":[{"at":"2030-01-02T03:04:05Z","who":"w","action":"create","version":1,"changes_total":1,"truncated":false,
				"changes":[{"path":"outflow.rate","old":null,"new":5,"truncated":false}]}],"next_cursor":null}`)},
			"matches none of anyOf"},
		{"body on 204", answer{method: "DELETE", path: "/admin/v1/tenants/acme", status: 204, body: []byte(`{}`)}, "a body is not documented"},
	} {
		problems, _ := s.check(tc.a)
		switch {
		case tc.want == "" && len(problems) > 0:
			t.Errorf("%s: problems %q, want none", tc.name, problems)
		case tc.want != "" && (len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), tc.want)):
			t.Errorf("%s: problems %q, want one containing %q", tc.name, problems, tc.want)
		}
	}
}

// TestSpecRefsResolve walks the whole document and resolves every $ref,
// so a typo in a reference fails here rather than only when a check
// happens to reach it.
func TestSpecRefsResolve(t *testing.T) {
	s := loadSpec(t)
	if v, _ := s.doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	var walk func(at string, node any)
	walk = func(at string, node any) {
		switch x := node.(type) {
		case map[string]any:
			if _, ok := x["$ref"]; ok {
				if _, err := s.ref(x); err != nil {
					t.Errorf("%s: %v", at, err)
				}
			}
			for k, v := range x {
				walk(at+"/"+k, v)
			}
		case []any:
			for _, v := range x {
				walk(at+"[]", v)
			}
		}
	}
	walk("#", s.doc)
	for _, tpl := range s.paths() {
		for _, m := range s.methods(tpl) {
			op, _ := s.operation(tpl, m)
			if id, _ := op["operationId"].(string); id == "" {
				t.Errorf("%s %s: no operationId", m, tpl)
			}
			if _, ok := op["security"]; !ok {
				t.Errorf("%s %s: no security (use [] for none)", m, tpl)
			}
		}
	}
}
