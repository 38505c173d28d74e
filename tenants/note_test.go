package tenants

import (
	"context"
	"testing"
)

// TestNote: an audited operation that is not a spec change takes one
// audit entry and one version, leaves the spec and the source as they are
// (a tenant of the file stays one), and keeps the audit's pages in order.
func TestNote(t *testing.T) {
	t.Parallel()
	_, rdb := privateRedis(t)
	ctx := context.Background()
	base := baseConfig(t, fileTenant("acme", 5))
	r, _ := startRegistry(t, rdb, base, RegistryConfig{})
	if err := r.Note(ctx, "acme", "alice", testAt, ActionDLQRedrive, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Patch(ctx, "acme", []byte(`{"outflow":{"rate":7}}`), "bob", testAt); err != nil {
		t.Fatal(err)
	}
	if err := r.Note(ctx, "acme", "alice", testAt, ActionDLQDelete, 1); err != nil {
		t.Fatal(err)
	}
	v, err := r.Get(ctx, "acme")
	if err != nil || v.Version != 3 || v.Source != SourceRuntime || v.Spec.Outflow.Rate != 7 {
		t.Errorf("after note, patch, note: %+v (%v), want version 3, the patched runtime spec", v, err)
	}
	var got []string
	for cursor := int64(0); ; {
		p, err := r.store.Audit(ctx, "acme", cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			got = append(got, e.Action)
			if e.Action != ActionUpdate && (len(e.Changes) != 0 || e.Count == 0) {
				t.Errorf("note entry %+v, want no changes and a count", e)
			}
		}
		if p.Next == 0 {
			break
		}
		cursor = p.Next
	}
	if want := []string{ActionDLQDelete, ActionUpdate, ActionDLQRedrive}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("audit pages of one entry: %v, want %v", got, want)
	}

	// A tenant of the file that only had notes stays the file's.
	base2 := baseConfig(t, fileTenant("fileco", 5))
	_, rdb2 := privateRedis(t)
	r2, _ := startRegistry(t, rdb2, base2, RegistryConfig{})
	if err := r2.Note(ctx, "fileco", "alice", testAt, ActionDLQDelete, 2); err != nil {
		t.Fatal(err)
	}
	if v, err := r2.Get(ctx, "fileco"); err != nil || v.Source != SourceConfig || v.Version != 1 || v.Spec.Outflow.Rate != 5 {
		t.Errorf("file tenant after a note: %+v (%v), want source config, version 1, its file spec", v, err)
	}
}
