package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestEveryOperationHasExamples: every operation of the spec has an example
// for each media type of its request body (when it has one) and of each of
// its responses with content (problem+json errors included), and every
// example is valid against its media type's schema. An operation added
// later without its examples fails here.
func TestEveryOperationHasExamples(t *testing.T) {
	s := loadSpec(t)
	for _, p := range s.exampleProblems() {
		t.Error(p)
	}
}

// exampleProblems returns every missing or invalid example of s's
// operations, each naming the operation, the status (or "request") and the
// media type.
func (s *spec) exampleProblems() []string {
	var out []string
	for _, tpl := range s.paths() {
		for _, m := range s.methods(tpl) {
			op, _ := s.operation(tpl, m)
			at := m + " " + tpl
			if rb, ok := op["requestBody"]; ok {
				body, err := s.ref(rb)
				if err != nil {
					out = append(out, fmt.Sprintf("%s request: %v", at, err))
					continue
				}
				out = append(out, s.contentExampleProblems(at+" request", body["content"], true)...)
			}
			responses, _ := op["responses"].(map[string]any)
			for _, code := range sortedKeys(responses) {
				resp, err := s.ref(responses[code])
				if err != nil {
					out = append(out, fmt.Sprintf("%s %s: %v", at, code, err))
					continue
				}
				out = append(out, s.contentExampleProblems(at+" "+code, resp["content"], false)...)
			}
		}
	}
	return out
}

// contentExampleProblems checks the examples of each media type of content
// (a request body's or response's content map); a request body must have
// content.
func (s *spec) contentExampleProblems(at string, content any, required bool) []string {
	cm, _ := content.(map[string]any)
	if len(cm) == 0 {
		if required {
			return []string{at + ": a request body without content"}
		}
		return nil
	}
	var out []string
	for _, mt := range sortedKeys(cm) {
		media, _ := cm[mt].(map[string]any)
		where := at + " " + mt
		examples, problems := s.mediaExamples(media)
		for _, p := range problems {
			out = append(out, where+": "+p)
		}
		if len(examples) == 0 && len(problems) == 0 {
			out = append(out, where+": no example (add example: or examples: next to the schema)")
		}
		for _, name := range sortedKeys(examples) {
			v, err := jsonValue(examples[name])
			if err != nil {
				out = append(out, fmt.Sprintf("%s: %s: %v", where, name, err))
				continue
			}
			for _, e := range s.validate(media["schema"], v, name) {
				out = append(out, where+": "+e)
			}
		}
	}
	return out
}

// mediaExamples returns a media type object's example values by name:
// "example" for its example member, "examples.<name>" for each member of
// its examples map (an Example object or a $ref to one, with a value).
func (s *spec) mediaExamples(media map[string]any) (map[string]any, []string) {
	out := map[string]any{}
	var problems []string
	if v, ok := media["example"]; ok {
		out["example"] = v
	}
	exs, _ := media["examples"].(map[string]any)
	for name, node := range exs {
		ex, err := s.ref(node)
		if err != nil {
			problems = append(problems, fmt.Sprintf("examples.%s: %v", name, err))
			continue
		}
		v, ok := ex["value"]
		if !ok {
			problems = append(problems, fmt.Sprintf("examples.%s: no value (an externalValue is not checked; inline it)", name))
			continue
		}
		out["examples."+name] = v
	}
	return out, problems
}

// jsonValue turns a value decoded from YAML into the one encoding/json
// decodes (with UseNumber) from its JSON text, the form validate takes.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	return out, dec.Decode(&out)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestExampleCheckerCatchesMismatches runs exampleProblems on a small spec
// that breaks each rule once, so TestEveryOperationHasExamples passing
// means something.
func TestExampleCheckerCatchesMismatches(t *testing.T) {
	s := parseSpec(t, `
paths:
  /a:
    post:
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Thing'}
      responses:
        '200':
          description: no example
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Thing'}
        '204':
          description: no content, no example needed
        '400': {$ref: '#/components/responses/Bad'}
        '409':
          description: examples map
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Thing'}
              examples:
                good: {value: {n: 1}}
                shared: {$ref: '#/components/examples/Wrong'}
                external: {externalValue: 'https://example.com/x.json'}
components:
  schemas:
    Thing:
      type: object
      required: [n]
      additionalProperties: false
      properties:
        n: {type: integer, minimum: 1}
  responses:
    Bad:
      description: invalid example
      content:
        application/problem+json:
          schema: {$ref: '#/components/schemas/Thing'}
          example: {n: 0, extra: true}
  examples:
    Wrong: {value: {n: "one"}}
`)
	got := strings.Join(s.exampleProblems(), "\n")
	for _, want := range []string{
		"POST /a request application/json: no example",
		"POST /a 200 application/json: no example",
		"POST /a 400 application/problem+json: example.n: 0 is below the minimum 1",
		`POST /a 400 application/problem+json: example: member "extra" is not in the schema`,
		"POST /a 409 application/json: examples.shared.n: type string, want integer",
		"POST /a 409 application/json: examples.external: no value",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q; got:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"204", "examples.good"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("problems mention %q, which is fine; got:\n%s", unwanted, got)
		}
	}
}
