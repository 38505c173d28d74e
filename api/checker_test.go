package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// A small checker of HTTP answers against api/openapi.yaml: the operation
// (path template and method), the status, the media type, the body against
// the JSON Schema subset the spec uses (type and type lists, enum, const,
// required, properties, additionalProperties, items, minItems, minimum,
// maximum, pattern, format date-time and uri, allOf, anyOf, oneOf, $ref to
// #/components/...), and the headers (required ones present, present ones
// valid). A heavier OpenAPI library would validate more keywords than this
// spec uses; ADR 0000 prefers no new module for it.

// spec is the decoded OpenAPI document.
type spec struct {
	doc map[string]any
}

func loadSpec(t *testing.T) *spec {
	t.Helper()
	b, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return parseSpec(t, string(b))
}

// parseSpec decodes an OpenAPI document from YAML text.
func parseSpec(t *testing.T, text string) *spec {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	return &spec{doc: doc}
}

// ref resolves node's $ref ("#/components/schemas/X") until none is left.
func (s *spec) ref(node any) (map[string]any, error) {
	m, ok := node.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not an object: %v", node)
	}
	for i := 0; i < 10; i++ {
		r, ok := m["$ref"].(string)
		if !ok {
			return m, nil
		}
		var cur any = s.doc
		for _, part := range strings.Split(strings.TrimPrefix(r, "#/"), "/") {
			obj, ok := cur.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("$ref %s: not found", r)
			}
			cur = obj[part]
		}
		if m, ok = cur.(map[string]any); !ok {
			return nil, fmt.Errorf("$ref %s: not found", r)
		}
	}
	return nil, fmt.Errorf("$ref chain too long")
}

// paths returns the spec's path templates.
func (s *spec) paths() []string {
	ps, _ := s.doc["paths"].(map[string]any)
	out := make([]string, 0, len(ps))
	for p := range ps {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// methods returns the upper-case methods documented for template.
func (s *spec) methods(template string) []string {
	item, _ := s.doc["paths"].(map[string]any)[template].(map[string]any)
	var out []string
	for _, m := range []string{"get", "put", "post", "delete", "patch", "head", "options"} {
		if _, ok := item[m]; ok {
			out = append(out, strings.ToUpper(m))
		}
	}
	return out
}

// operation returns the operation of method on template.
func (s *spec) operation(template, method string) (map[string]any, bool) {
	item, _ := s.doc["paths"].(map[string]any)[template].(map[string]any)
	op, ok := item[strings.ToLower(method)].(map[string]any)
	return op, ok
}

// match finds the template of a request path: segment by segment, {x}
// matching any one non-empty segment; a template with fewer parameters wins.
func (s *spec) match(path string) (string, bool) {
	best, bestParams := "", -1
	got := strings.Split(path, "/")
	for _, tpl := range s.paths() {
		want := strings.Split(tpl, "/")
		if len(want) != len(got) {
			continue
		}
		params, ok := 0, true
		for i := range want {
			switch {
			case strings.HasPrefix(want[i], "{") && strings.HasSuffix(want[i], "}"):
				params++
				ok = ok && got[i] != ""
			case strings.HasPrefix(want[i], "{") && strings.Contains(want[i], "}"):
				// A parameter with a literal suffix ("{id}:heartbeat"): more
				// specific than a bare parameter, so it counts as none.
				suffix := want[i][strings.Index(want[i], "}")+1:]
				ok = ok && strings.HasSuffix(got[i], suffix) && len(got[i]) > len(suffix)
			default:
				ok = ok && want[i] == got[i]
			}
		}
		if ok && (bestParams < 0 || params < bestParams) {
			best, bestParams = tpl, params
		}
	}
	return best, bestParams >= 0
}

// answer is one HTTP exchange to check.
type answer struct {
	method, path string
	status       int
	header       http.Header
	body         []byte
}

// check returns every way a answers differently from the spec, and the
// operation's "METHOD template" key (empty when the operation is unknown).
func (s *spec) check(a answer) (problems []string, opKey string) {
	tpl, ok := s.match(a.path)
	if !ok {
		return []string{fmt.Sprintf("%s %s: no such path in the spec", a.method, a.path)}, ""
	}
	op, ok := s.operation(tpl, a.method)
	if !ok {
		return []string{fmt.Sprintf("%s %s: no %s operation on %s in the spec", a.method, a.path, a.method, tpl)}, ""
	}
	opKey = a.method + " " + tpl
	fail := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s %s → %d: ", a.method, a.path, a.status)+fmt.Sprintf(format, args...))
	}
	responses, _ := op["responses"].(map[string]any)
	rnode, ok := responses[strconv.Itoa(a.status)]
	if !ok {
		fail("status %d is not documented for %s (documented: %s)", a.status, opKey, keysOf(responses))
		return problems, opKey
	}
	resp, err := s.ref(rnode)
	if err != nil {
		fail("%v", err)
		return problems, opKey
	}
	headers, _ := resp["headers"].(map[string]any)
	for name, hnode := range headers {
		h, err := s.ref(hnode)
		if err != nil {
			fail("header %s: %v", name, err)
			continue
		}
		v := a.header.Get(name)
		if v == "" {
			if req, _ := h["required"].(bool); req {
				fail("required header %s is missing", name)
			}
			continue
		}
		for _, e := range s.validate(h["schema"], headerValue(h["schema"], v), "header "+name) {
			fail("%s", e)
		}
	}
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if len(bytes.TrimSpace(a.body)) > 0 {
			fail("a body is not documented, got %q", a.body)
		}
		return problems, opKey
	}
	mt, _, err := mime.ParseMediaType(a.header.Get("Content-Type"))
	if err != nil {
		fail("Content-Type %q: %v", a.header.Get("Content-Type"), err)
		return problems, opKey
	}
	media, ok := content[mt].(map[string]any)
	if !ok {
		fail("Content-Type %s is not documented (documented: %s)", mt, keysOf(content))
		return problems, opKey
	}
	if mt != "application/json" && mt != "application/problem+json" {
		return problems, opKey
	}
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.UseNumber()
	var body any
	if err := dec.Decode(&body); err != nil {
		fail("body is not JSON: %v: %q", err, a.body)
		return problems, opKey
	}
	for _, e := range s.validate(media["schema"], body, "body") {
		fail("%s", e)
	}
	return problems, opKey
}

// headerValue turns a header's text into the JSON value its schema types:
// a json.Number for an integer schema, the string otherwise.
func headerValue(schema any, v string) any {
	if m, ok := schema.(map[string]any); ok && m["type"] == "integer" {
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			return json.Number(v)
		}
	}
	return v
}

func keysOf(m map[string]any) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}
