package api

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

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
