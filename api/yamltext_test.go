package api

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestNoTextCutShort: a plain (unquoted) description in a flow mapping
// ({type: integer, description: ...}) ends at its first comma, and YAML
// reads the rest as a key without a value. No key of openapi.yaml is
// without a value, so no text of it was cut short; quote such a text with
// "..." or '...', or write it as a | block.
func TestNoTextCutShort(t *testing.T) {
	b, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range keysWithoutValue(t, string(b)) {
		t.Errorf("openapi.yaml:%s", p)
	}
	cut := keysWithoutValue(t, "a: {type: integer, description: The Retry-After header, in seconds.}\nb: {description: 'Quoted, whole.'}\n")
	if want := `1:57: key "in seconds." has no value`; len(cut) != 1 || !strings.Contains(cut[0], want) {
		t.Errorf("keysWithoutValue of a cut text = %q, want one problem containing %q", cut, want)
	}
}

// keysWithoutValue returns "line:column: ..." for every mapping key of the
// YAML text whose value is an implicit null (nothing written).
func keysWithoutValue(t *testing.T, text string) []string {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(text), &root); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if v.Kind == yaml.ScalarNode && v.Tag == "!!null" && v.Value == "" {
					out = append(out, fmt.Sprintf("%d:%d: key %q has no value: the end of a text cut at a comma?", k.Line, k.Column, k.Value))
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	return out
}
