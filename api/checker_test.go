package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

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
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
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

// validate checks v (decoded with UseNumber) against schema and returns
// the errors, each naming where in v it is.
func (s *spec) validate(schemaNode, v any, at string) []string {
	if schemaNode == nil {
		return nil
	}
	sch, err := s.ref(schemaNode)
	if err != nil {
		return []string{fmt.Sprintf("%s: schema: %v", at, err)}
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }

	for _, sub := range list(sch["allOf"]) {
		errs = append(errs, s.validate(sub, v, at)...)
	}
	if alts := list(sch["anyOf"]); len(alts) > 0 && s.matching(alts, v, at) == 0 {
		bad("matches none of anyOf")
	}
	if alts := list(sch["oneOf"]); len(alts) > 0 && s.matching(alts, v, at) != 1 {
		bad("matches %d of oneOf, want exactly 1", s.matching(alts, v, at))
	}
	if t, ok := sch["type"]; ok && !typeOK(t, v) {
		bad("type %s, want %v", jsonType(v), t)
		return errs
	}
	if enum := list(sch["enum"]); len(enum) > 0 && !contains(enum, v) {
		bad("%v is not one of %v", v, enum)
	}
	if c, ok := sch["const"]; ok && !contains([]any{c}, v) {
		bad("%v, want %v", v, c)
	}
	if f, ok := number(v); ok {
		if lo, ok := number(sch["minimum"]); ok && f < lo {
			bad("%v is below the minimum %v", v, lo)
		}
		if hi, ok := number(sch["maximum"]); ok && f > hi {
			bad("%v is above the maximum %v", v, hi)
		}
	}
	switch x := v.(type) {
	case string:
		if p, ok := sch["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(x) {
			bad("%q does not match %s", x, p)
		}
		switch sch["format"] {
		case "date-time":
			if _, err := time.Parse(time.RFC3339Nano, x); err != nil {
				bad("%q is not an RFC 3339 date-time", x)
			}
		case "uri":
			if !strings.Contains(x, "://") {
				bad("%q is not a URI", x)
			}
		}
	case []any:
		if n, ok := number(sch["minItems"]); ok && float64(len(x)) < n {
			bad("%d items, want at least %v", len(x), n)
		}
		for i, item := range x {
			errs = append(errs, s.validate(sch["items"], item, fmt.Sprintf("%s[%d]", at, i))...)
		}
	case map[string]any:
		for _, r := range list(sch["required"]) {
			if _, ok := x[r.(string)]; !ok {
				bad("required member %q is missing", r)
			}
		}
		props, _ := sch["properties"].(map[string]any)
		for k, val := range x {
			if p, ok := props[k]; ok {
				errs = append(errs, s.validate(p, val, at+"."+k)...)
				continue
			}
			switch ap := sch["additionalProperties"].(type) {
			case bool:
				if !ap {
					bad("member %q is not in the schema", k)
				}
			case map[string]any:
				errs = append(errs, s.validate(ap, val, at+"."+k)...)
			}
		}
	}
	return errs
}

// matching counts the alternatives v is valid against.
func (s *spec) matching(alts []any, v any, at string) int {
	n := 0
	for _, a := range alts {
		if len(s.validate(a, v, at)) == 0 {
			n++
		}
	}
	return n
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// typeOK reports whether v has type t, a name or a list of names (3.1).
func typeOK(t, v any) bool {
	names := []any{t}
	if l, ok := t.([]any); ok {
		names = l
	}
	for _, n := range names {
		switch got := jsonType(v); {
		case n == got, n == "number" && got == "integer":
			return true
		}
	}
	return false
}

// jsonType names v's JSON type; a json.Number without a fraction or
// exponent is an integer.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// contains compares JSON values loosely: numbers by value, others by text.
func contains(set []any, v any) bool {
	for _, e := range set {
		if a, ok := number(e); ok {
			if b, ok := number(v); ok && a == b {
				return true
			}
			continue
		}
		if fmt.Sprint(e) == fmt.Sprint(v) {
			return true
		}
	}
	return false
}
