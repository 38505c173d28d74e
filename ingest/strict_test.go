package ingest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestStrictJobJSON (issue 7 req 6): field names match exactly, none may
// repeat, at any depth of a job or a batch (errors name jobs[i].field), and
// an empty id is not "no id". Each refusal names the field and leaves
// nothing in Redis: no queued job, no backlog, no idempotency key.
func TestStrictJobJSON(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "strict")
	h := startIngest(t, testConfig(t, tenantYAML(tenant, "    outflow: {rate: 5, max_backlog: 100}\n")), deps{rdb: rdb})
	for _, tc := range []struct {
		name, path, body string
		status           int
		field            string
	}{
		{"upper-case names", "/v1/jobs", `{"TYPE":"ok","Cost":1}`, 400, "TYPE"},
		{"one name in another case", "/v1/jobs", `{"type":"ok","Cost":1}`, 400, "Cost"},
		{"repeated cost", "/v1/jobs", `{"type":"ok","cost":-1,"cost":1}`, 400, "cost"},
		{"repeated type", "/v1/jobs", `{"type":"a b","type":"ok"}`, 400, "type"},
		{"repeated payload", "/v1/jobs", `{"type":"ok","payload":1,"payload":2}`, 400, "payload"},
		{"ID", "/v1/jobs", `{"type":"ok","ID":"x"}`, 400, "ID"},
		{"empty id", "/v1/jobs", `{"type":"ok","id":""}`, 422, "id"},
		{"batch: element field in another case", "/v1/jobs:batch", `{"jobs":[{"type":"ok"},{"type":"ok"},{"type":"ok"},{"type":"ok","Cost":2}]}`, 400, "jobs[3].Cost"},
		{"batch: repeated element field", "/v1/jobs:batch", `{"jobs":[{"type":"ok"},{"type":"ok"},{"type":"ok"},{"type":"ok","cost":1,"cost":2}]}`, 400, "jobs[3].cost"},
		{"batch: Jobs", "/v1/jobs:batch", `{"Jobs":[{"type":"ok"}]}`, 400, "Jobs"},
		{"batch: repeated jobs", "/v1/jobs:batch", `{"jobs":[{"type":"ok"}],"jobs":[{"type":"ok"}]}`, 400, "jobs"},
		{"batch: empty id", "/v1/jobs:batch", `{"jobs":[{"type":"ok","id":"a"},{"type":"ok","id":""}]}`, 422, "jobs[1].id"},
		{"batch: unknown after a good one", "/v1/jobs:batch", `{"jobs":[{"type":"ok","id":"a"},{"type":"ok","dedline":"x"}]}`, 400, "jobs[1].dedline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := h.post(t, tenant, tc.path, tc.body)
			m := a.json(t)
			if a.status != tc.status || m["field"] != tc.field {
				t.Errorf("%s → %d field %v, want %d field %q: %s", tc.body, a.status, m["field"], tc.status, tc.field, a.body)
			}
			nothingWritten(t, rdb, tenant)
		})
	}

	// The payload is the client's: its keys are not looked at, a repeated
	// one included, and it is queued byte for byte.
	payload := `{"A":1,"a":2,"x":1,"x":2,"nested":[{"Type":"y","Type":"z"}]}`
	a := h.post(t, tenant, "/v1/jobs", `{"type":"ok","payload":`+payload+`}`)
	if a.status != http.StatusAccepted {
		t.Fatalf("free-form payload: %d, want 202: %s", a.status, a.body)
	}
	q := queued(t, rdb, tenant)
	if len(q) != 1 || string(q[0].Payload) != payload {
		t.Errorf("queued %+v, want one job with payload %s", q, payload)
	}
}

// TestStrictAdminJSON (issue 7 req 6): the admin API's bodies (PUT spec,
// PATCH merge patch) are as strict: a field name in another case or given
// twice is a 422 naming it (the admin API answers every spec problem with
// 422), nothing is stored, and the body bounds of job bodies hold (415 for
// a content coding, 413 unread, 411 for Transfer-Encoding, 408 for a slow
// body).
func TestStrictAdminJSON(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	base := adminConfig(t)
	base.Ingest.BodyTimeout = 300 * time.Millisecond
	h := startAdminIngest(t, rdb, base, nil)
	const id = "strict"
	tp := "/admin/v1/tenants/" + id
	stored := func() (version int64) {
		t.Helper()
		a := h.admin(t, http.MethodGet, tp, aliceToken, "")
		if a.status == http.StatusNotFound {
			return 0
		}
		return decodeTenant(t, a).Version
	}
	auditLen := func() int64 {
		n, err := rdb.LLen(context.Background(), keys.Audit(id)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	refuse := func(method, body, field string) {
		t.Helper()
		v, n := stored(), auditLen()
		a := h.admin(t, method, tp, aliceToken, body)
		var m map[string]any
		_ = json.Unmarshal(a.body, &m)
		if a.status != http.StatusUnprocessableEntity || m["field"] != field {
			t.Errorf("%s %s → %d field %v, want 422 field %q: %s", method, body, a.status, m["field"], field, a.body)
		}
		if v2, n2 := stored(), auditLen(); v2 != v || n2 != n {
			t.Errorf("%s %s: version %d → %d, audit entries %d → %d; want nothing stored", method, body, v, v2, n, n2)
		}
	}
	refuse(http.MethodPut, `{"Outflow":{"rate":1}}`, "Outflow")
	refuse(http.MethodPut, `{"outflow":{"rate":1,"rate":2}}`, "outflow.rate")
	refuse(http.MethodPut, `{"target":{"url":"http://127.0.0.1:9/a","URL":"http://127.0.0.1:9/b"}}`, "target.URL")
	refuse(http.MethodPut, `{"job_types":{"a":{},"a":{"admission":{"algorithm":"gcra","limit":1}}}}`, "job_types.a")
	if n, _ := rdb.Exists(context.Background(), keys.Override(id)).Result(); n != 0 {
		t.Fatalf("refused PUTs stored %s", keys.Override(id))
	}

	if a := h.admin(t, http.MethodPut, tp, aliceToken, `{"outflow":{"rate":5}}`); a.status != http.StatusCreated {
		t.Fatalf("valid PUT: %d: %s", a.status, a.body)
	}
	refuse(http.MethodPatch, `{"outflow":{"Rate":1}}`, "outflow.Rate")
	refuse(http.MethodPatch, `{"outflow":{"rate":1},"outflow":{"rate":2}}`, "outflow")
	refuse(http.MethodPatch, `{"outflow":{"rate":1,"rate":null}}`, "outflow.rate")

	addr := strings.TrimPrefix(h.url, "http://")
	v, n := stored(), auditLen()
	spec := `{"outflow":{"rate":7}}`
	for _, tc := range []struct {
		name, req string
		status    int
		field     string
	}{
		{"gzip", rawRequest("PUT", tp, aliceToken, "application/json", spec, "Content-Encoding: gzip"), 415, "Content-Encoding"},
		{"patch gzip", rawRequest("PATCH", tp, aliceToken, "application/merge-patch+json", spec, "Content-Encoding: deflate"), 415, "Content-Encoding"},
		{"Content-Length over the limit, no body", rawRequest("PUT", tp, aliceToken, "application/json", "", "Content-Length: 1000000"), 413, ""},
		{"chunked", rawRequest("PUT", tp, aliceToken, "application/json", "16\r\n"+spec+"\r\n0\r\n\r\n", "Transfer-Encoding: chunked", "Content-Length: 22"), 411, "Transfer-Encoding"},
		{"slow body", rawRequest("PUT", tp, aliceToken, "application/json", `{"outf`, "Content-Length: 22"), 408, ""},
	} {
		checkProblem(t, "admin "+tc.name, exchange(t, addr, tc.req, 3*time.Second), tc.status, tc.field)
	}
	if v2, n2 := stored(), auditLen(); v2 != v || n2 != n {
		t.Errorf("refused raw requests: version %d → %d, audit %d → %d; want nothing stored", v, v2, n, n2)
	}
}
