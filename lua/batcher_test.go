package lua

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChunks: items go by key in the order each key first appears, at
// most Max per call, an id at most once per call of its key, and at most
// MaxWeight of weight per call (an item too heavy, or of a negative
// weight, alone); with Max 1 each item alone.
func TestChunks(t *testing.T) {
	type it struct {
		key, id string
		w       int64
	}
	self := func(x it) it { return x }
	spec := BatchSpec[it, any]{Key: func(x it) string { return x.key }, ID: func(x it) string { return x.id }, Max: 10}
	chunks := func(items []it, spec BatchSpec[it, any]) [][]string {
		var got [][]string
		for _, ch := range chunk(items, self, spec) {
			var s []string
			for _, x := range ch {
				s = append(s, x.key+"/"+x.id)
			}
			got = append(got, s)
		}
		return got
	}
	items := []it{{"a", "1", 0}, {"b", "1", 0}, {"a", "2", 0}, {"a", "1", 0}, {"b", "2", 0}, {"a", "3", 0}}
	want := [][]string{{"a/1", "a/2"}, {"b/1", "b/2"}, {"a/1", "a/3"}}
	if d := cmp.Diff(want, chunks(items, spec)); d != "" {
		t.Errorf("chunks (-want +got):\n%s", d)
	}
	var many []it
	for i := range 7 {
		many = append(many, it{"a", strings.Repeat("x", i+1), 0})
	}
	three := spec
	three.Max = 3
	if d := cmp.Diff([][]string{{"a/x", "a/xx", "a/xxx"}, {"a/xxxx", "a/xxxxx", "a/xxxxxx"}, {"a/xxxxxxx"}}, chunks(many, three)); d != "" {
		t.Errorf("7 items, max 3 (-want +got):\n%s", d)
	}
	one := spec
	one.Max = 1
	if d := cmp.Diff([][]string{{"a/1"}, {"b/1"}, {"a/2"}}, chunks(items[:3], one)); d != "" {
		t.Errorf("max 1 (-want +got):\n%s", d)
	}
	noID := spec
	noID.ID = nil
	if got := chunks([]it{{"a", "1", 0}, {"a", "1", 0}}, noID); len(got) != 1 {
		t.Errorf("without ids, a repeated id stays in the call: %v", got)
	}
	weighed := spec
	weighed.Weight, weighed.MaxWeight = func(x it) int64 { return x.w }, 10
	heavy := []it{{"a", "1", 6}, {"a", "2", 4}, {"a", "3", 1}, {"a", "4", 11}, {"a", "5", -1}, {"a", "6", 2}, {"a", "7", 3}}
	want = [][]string{{"a/1", "a/2"}, {"a/3"}, {"a/4"}, {"a/5"}, {"a/6", "a/7"}}
	if d := cmp.Diff(want, chunks(heavy, weighed)); d != "" {
		t.Errorf("weights 6 4 1 11 -1 2 3, at most 10 a call (-want +got):\n%s", d)
	}
}
