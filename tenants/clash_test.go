package tenants

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestRacingPutsOfOneKey: two admins, each on their own instance, give one
// API key to two new tenants at the same moment, 30 times. At most one
// put of each pair stands (the other is refused with a *SpecError naming
// the clash), and the stored records merge into a valid configuration.
// Before, 16 of 30 such pairs were both stored (201, 201), and every
// registry then kept its running config for good.
func TestRacingPutsOfOneKey(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	base := baseConfig(t)
	r1, _ := startRegistry(t, rdb, base, RegistryConfig{})
	r2, _ := startRegistry(t, rdb, base, RegistryConfig{})
	both := 0
	for i := range 30 {
		spec := config.Tenant{APIKeys: []string{config.HashKey(fmt.Sprintf("key-%d", i))}}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for j, r := range []*Registry{r1, r2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[j] = r.Put(ctx, fmt.Sprintf("rc%d-%c", i, 'a'+j), spec, "alice", testAt)
			}()
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if _, ok := IsSpecError(err); err != nil && !ok {
				t.Fatalf("pair %d: %v, want nil or a *SpecError", i, err)
			}
		}
		if errs[0] == nil && errs[1] == nil {
			both++
		}
	}
	if both > 0 {
		t.Errorf("%d of 30 pairs both stored one key", both)
	}
	recs, err := r1.store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := Merge(base, recs).Validate(); err != nil {
		t.Errorf("the stored records do not merge into a valid config: %v", err)
	}
}
