package api

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// reportCoverage fails for every documented operation that no check
// reached with its expected status, and logs documented statuses no check
// produced.
func (s *server) reportCoverage(t *testing.T) {
	t.Helper()
	var missing, untried []string
	for _, tpl := range s.spec.paths() {
		for _, m := range s.spec.methods(tpl) {
			op := m + " " + tpl
			seen := s.covered[op]
			if len(seen) == 0 {
				missing = append(missing, op)
				continue
			}
			o, _ := s.spec.operation(tpl, m)
			rs, _ := o["responses"].(map[string]any)
			for code := range rs {
				var n int
				if _, err := fmt.Sscan(code, &n); err == nil && !seen[n] {
					untried = append(untried, op+" "+code)
				}
			}
		}
	}
	sort.Strings(untried)
	if len(untried) > 0 {
		t.Logf("documented statuses not produced by these checks: %s", strings.Join(untried, ", "))
	}
	if len(missing) > 0 {
		t.Errorf("documented operations never answered as expected: %s", strings.Join(missing, ", "))
	}
}

// checkRoutes is the converse check: every route pattern ingest registers
// (read from its source) is in the spec, and on the spec's paths every
// method the spec leaves out, and paths next to them, are refused (404 or
// 405; or 401 for a credential the area does not take, since the admin API
// authenticates before it routes), with the tenant key and with the admin
// token, so the server answers no operation the spec does not describe.
func (s *server) checkRoutes(t *testing.T) {
	for _, p := range routePatterns(t) {
		method, path, hasMethod := strings.Cut(p, " ")
		if !hasMethod {
			method, path = "", p
		}
		switch {
		case path == "/":
			// The catch-all: answers every unknown route with a 404 problem.
		case strings.HasSuffix(path, "/"):
			found := false
			for _, tpl := range s.spec.paths() {
				found = found || strings.HasPrefix(tpl, path)
			}
			if !found {
				t.Errorf("ingest serves the subtree %q, and no path of the spec is under it", p)
			}
		default:
			tpl, ok := s.spec.match(path)
			if !ok {
				t.Errorf("ingest serves %q, which the spec does not describe", p)
				continue
			}
			if method != "" && !contains(anySlice(s.spec.methods(tpl)), method) && !s.spec.suffixed(tpl, method) {
				t.Errorf("ingest serves %q; the spec has no %s on %s", p, method, tpl)
			}
		}
	}
	ids := strings.NewReplacer("{id}", s.tenantA)
	for _, tpl := range s.spec.paths() {
		path := ids.Replace(tpl)
		documented := s.spec.methods(tpl)
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if contains(anySlice(documented), m) {
				continue
			}
			for _, auth := range []string{keyA, adminToken} {
				a := s.send(t, req{method: m, path: path, auth: auth, body: "{}"})
				if !refused(a.status) {
					t.Errorf("%s %s answers %d, but the spec has no %s on %s: %s", m, path, a.status, m, tpl, a.body)
				}
			}
		}
	}
	for _, path := range []string{"/v1", "/v1/tenants", "/v1/tenants/" + s.tenantA, "/v1/tenants/" + s.tenantA + "/other",
		"/v1/jobs/x/y", "/admin", "/admin/v1", "/admin/v1/other", "/admin/v2/tenants", "/admin/v1/tenants/" + s.tenantA + "/audit/x",
		"/admin/v1/tenants/" + s.tenantA + "/other", "/v2/jobs", "/healthz/x"} {
		for _, auth := range []string{keyA, adminToken} {
			if a := s.send(t, req{method: "GET", path: path, auth: auth}); !refused(a.status) {
				t.Errorf("GET %s (undocumented) answers %d, want 404 (or 401, 405): %s", path, a.status, a.body)
			}
		}
	}
}

// routePatterns returns the ServeMux patterns registered in ingest's
// source: the first string argument of route(...), Handle(...) and
// HandleFunc(...) calls.
func routePatterns(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../ingest/*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`\b(?:route|Handle|HandleFunc)\("((?:[A-Z]+ )?/[^"]*)"`)
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				out = append(out, m[1])
			}
		}
	}
	if len(out) < 4 {
		t.Fatalf("found only %d route patterns in ingest/*.go (%q); has the registration changed shape?", len(out), out)
	}
	sort.Strings(out)
	return out
}

// suffixed reports whether the spec has method on a path that is tpl with
// a literal suffix on its last parameter ("/v1/jobs/{id}:heartbeat" for
// "/v1/jobs/{id}"): ServeMux serves such a path as tpl (a wildcard and a
// literal cannot share a segment), and the handler tells them apart.
func (s *spec) suffixed(tpl, method string) bool {
	for _, other := range s.paths() {
		rest, ok := strings.CutPrefix(other, tpl)
		if ok && strings.HasSuffix(tpl, "}") && rest != "" && !strings.Contains(rest, "/") && contains(anySlice(s.methods(other)), method) {
			return true
		}
	}
	return false
}

// refused reports whether status turns a request away without serving it.
func refused(status int) bool { return status == 401 || status == 404 || status == 405 }

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
