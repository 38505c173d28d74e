package redisq

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/keys"
)

// TestBacklogKeysReusedForTheSameList: Probe's counter keys are built once
// per tenant list and rebuilt, right, when the list changes.
func TestBacklogKeysReusedForTheSameList(t *testing.T) {
	var b backlogKeys
	list := []string{"a", "b", "c"}
	first := b.of(list)
	want := []string{keys.Backlog("a"), keys.Backlog("b"), keys.Backlog("c")}
	if !slices.Equal(first, want) {
		t.Fatalf("keys %v, want %v", first, want)
	}
	again := b.of(slices.Clone(list))
	if &again[0] != &first[0] {
		t.Error("the same list built its keys again")
	}
	list[1] = "x" // the caller's slice changed after the first call
	if got := b.of(list); !slices.Equal(got, []string{keys.Backlog("a"), keys.Backlog("x"), keys.Backlog("c")}) {
		t.Errorf("after a change: %v", got)
	}
	if got := b.of([]string{"c"}); !slices.Equal(got, []string{keys.Backlog("c")}) {
		t.Errorf("a shorter list: %v", got)
	}
}
