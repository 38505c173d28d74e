package ingest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestContentTypeStrict (issue 7 req 6): a request with two Content-Type
// headers and a JSON body in a charset other than UTF-8 are 415 naming
// Content-Type, on the job routes and the admin API alike, and nothing is
// written; charset=utf-8 (any case) and no charset are accepted.
func TestContentTypeStrict(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	tenant := testenv.Name(t, "ctype")
	h := startAdminIngest(t, rdb, adminConfig(t, tenantYAML(tenant, "")), nil)
	addr := strings.TrimPrefix(h.url, "http://")
	spec := `{"api_keys":["` + "sha256:" + strings.Repeat("ab", 32) + `"]}`
	type route struct{ method, path, token, ct, body string }
	routes := []route{
		{"POST", "/v1/jobs", apiKey(tenant), "application/json", `{"type":"ok"}`},
		{"POST", "/v1/jobs:batch", apiKey(tenant), "application/json", `{"jobs":[{"type":"ok"}]}`},
		{"PUT", "/admin/v1/tenants/" + tenant + "-new", aliceToken, "application/json", spec},
		{"PATCH", "/admin/v1/tenants/" + tenant, aliceToken, "application/merge-patch+json", `{}`},
	}
	for _, rt := range routes {
		for name, req := range map[string]string{
			"two Content-Type":       rawRequest(rt.method, rt.path, rt.token, rt.ct, rt.body, "Content-Type: text/plain"),
			"two equal Content-Type": rawRequest(rt.method, rt.path, rt.token, rt.ct, rt.body, "Content-Type: "+rt.ct),
			"charset latin1":         rawRequest(rt.method, rt.path, rt.token, rt.ct+"; charset=latin1", rt.body),
			"charset utf-16":         rawRequest(rt.method, rt.path, rt.token, rt.ct+"; charset=utf-16", rt.body),
		} {
			a := exchange(t, addr, req, 5*time.Second)
			checkProblem(t, rt.method+" "+rt.path+" "+name, a, http.StatusUnsupportedMediaType, "Content-Type")
		}
	}
	nothingWritten(t, rdb, tenant)
	nothingWritten(t, rdb, tenant+"-new")
	for _, ct := range []string{"application/json; charset=UTF-8", "application/json;charset=utf-8", "application/json"} {
		a := exchange(t, addr, rawRequest("POST", "/v1/jobs", apiKey(tenant), ct, `{"type":"ok"}`), 5*time.Second)
		if a.status != http.StatusAccepted {
			t.Errorf("POST /v1/jobs Content-Type %q: status %d, want 202: %s", ct, a.status, a.body)
		}
		a = exchange(t, addr, rawRequest("PATCH", "/admin/v1/tenants/"+tenant, aliceToken, strings.Replace(ct, "application/json", "application/merge-patch+json", 1), `{}`), 5*time.Second)
		if a.status != http.StatusOK {
			t.Errorf("PATCH Content-Type %q: status %d, want 200: %s", ct, a.status, a.body)
		}
	}
}

// TestTransferEncodingIdentity (issue 7 req 6): "Transfer-Encoding:
// identity", with or without a Content-Length, is refused by net/http
// itself with 501 text/plain before any handler runs (RFC 9112 §6.1: a
// transfer coding the server does not implement), the connection closed,
// and nothing is queued. ingest has no parser of its own for it.
func TestTransferEncodingIdentity(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "teid")
	addr := serveIngest(t, boundsConfig(t, "body_timeout: 5s", tenantYAML(tenant, "")), rdb, nil)
	for _, extra := range [][]string{
		{"Transfer-Encoding: identity", "Content-Length: 13"},
		{"Content-Length: 13", "Transfer-Encoding: identity"},
		{"Transfer-Encoding: identity"},
	} {
		a := exchange(t, addr, rawPost("/v1/jobs", tenant, `{"type":"ok"}`, extra...), 5*time.Second)
		if a.status != http.StatusNotImplemented || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") || !a.closed {
			t.Errorf("%q: status %d, Content-Type %q, closed %v; want net/http's 501 text/plain and the connection closed: %s",
				extra, a.status, a.header.Get("Content-Type"), a.closed, a.body)
		}
	}
	nothingWritten(t, rdb, tenant)
}
