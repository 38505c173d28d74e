package lua

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChunks: items go by key in the order each key first appears, at
// most max per call, and an id at most once per call of its key.
func TestChunks(t *testing.T) {
	type it struct{ key, id string }
	self := func(x it) it { return x }
	key := func(x it) string { return x.key }
	id := func(x it) string { return x.id }
	chunk := func(items []it, max int) [][]string {
		var got [][]string
		for _, ch := range Chunks(items, self, key, id, max) {
			var s []string
			for _, x := range ch {
				s = append(s, x.key+"/"+x.id)
			}
			got = append(got, s)
		}
		return got
	}
	items := []it{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"a", "1"}, {"b", "2"}, {"a", "3"}}
	want := [][]string{{"a/1", "a/2"}, {"b/1", "b/2"}, {"a/1", "a/3"}}
	if d := cmp.Diff(want, chunk(items, 10)); d != "" {
		t.Errorf("chunks (-want +got):\n%s", d)
	}
	var many []it
	for i := range 7 {
		many = append(many, it{"a", strings.Repeat("x", i+1)})
	}
	if d := cmp.Diff([][]string{{"a/x", "a/xx", "a/xxx"}, {"a/xxxx", "a/xxxxx", "a/xxxxxx"}, {"a/xxxxxxx"}}, chunk(many, 3)); d != "" {
		t.Errorf("7 items, max 3 (-want +got):\n%s", d)
	}
	if got := Chunks(items[:1], self, key, id, 1); len(got) != 1 || len(got[0]) != 1 {
		t.Errorf("one item: %v", got)
	}
	if got := Chunks([]it{{"a", "1"}, {"a", "1"}}, self, key, nil, 5); len(got) != 1 {
		t.Errorf("without ids, a repeated id stays in the call: %v", got)
	}
}
