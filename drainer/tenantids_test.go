package drainer

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestTenantIDsSortedAndStable: the configured ids come sorted, the same
// slice while the configuration is the same (so the prober can reuse what
// it built for it), a new one after SetTenants, and an append to them does
// not write into the shared slice.
func TestTenantIDsSortedAndStable(t *testing.T) {
	d := &Drainer{m: &metrics{}}
	m := map[string]config.Tenant{"c": {}, "a": {}, "b": {}}
	d.tenants.Store(&m)
	first := d.tenantIDs()
	if !slices.Equal(first, []string{"a", "b", "c"}) {
		t.Fatalf("ids %v, want a b c", first)
	}
	if again := d.tenantIDs(); &again[0] != &first[0] {
		t.Error("the same configuration built its ids again")
	}
	_ = append(first, "z")
	if got := d.tenantIDs(); len(got) != 3 || cap(got) != 3 {
		t.Errorf("an append changed the shared ids: %v (cap %d)", got, cap(got))
	}
	m2 := map[string]config.Tenant{"d": {}}
	d.tenants.Store(&m2)
	if got := d.tenantIDs(); !slices.Equal(got, []string{"d"}) {
		t.Errorf("after a new configuration: %v", got)
	}
}
