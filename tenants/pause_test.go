package tenants

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

// TestPauseAndResume pauses a file tenant with the merge patch the admin
// API and sluicectl pause send, and resumes it: the rest of its outflow is
// kept, another registry applies each change within the bound, and each
// audit entry shows outflow.paused false → true and true → false. A paused
// value that is not a boolean is refused naming the field.
func TestPauseAndResume(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	base := baseConfig(t, fileTenant("a", 5))
	admin, _ := startRegistry(t, rdb, base, RegistryConfig{})
	_, seen := startRegistry(t, rdb, base, RegistryConfig{})
	if base.Tenants["a"].Outflow.Paused {
		t.Fatal("a file tenant without outflow.paused is paused; want the default false")
	}

	for i, c := range []struct {
		patch   string
		paused  bool
		changes string
	}{
		{`{"outflow":{"paused":true}}`, true, "outflow.paused: false → true"},
		{`{"outflow":{"paused":false}}`, false, "outflow.paused: true → false"},
		{`{"outflow":{"paused":true}}`, true, "outflow.paused: false → true"},
		{`{"outflow":{"paused":null}}`, false, "outflow.paused: true → false"}, // null: the default again
	} {
		start := time.Now()
		res, err := admin.Patch(ctx, "a", []byte(c.patch), "alice", testAt)
		if err != nil {
			t.Fatalf("patch %d %s: %v", i, c.patch, err)
		}
		o := res.Spec.Outflow
		if o.Paused != c.paused || o.Rate != 5 || o.Capacity != 5 || o.Unlimited {
			t.Errorf("patch %d %s: outflow %+v, want paused %v with rate and capacity 5 kept", i, c.patch, o, c.paused)
		}
		at := seen.waitFor(t, propagationBound, "paused "+c.patch, func(cfg *config.Config) bool {
			return cfg.Tenants["a"].Outflow.Paused == c.paused && cfg.Tenants["a"].Outflow.Rate == 5
		})
		t.Logf("patch %d applied by the other registry after %v", i, at.Sub(start))
		page, err := admin.Store().Audit(ctx, "a", 0, 1)
		if err != nil || len(page.Entries) != 1 {
			t.Fatalf("audit after patch %d: %+v, %v", i, page, err)
		}
		if got := changesText(page.Entries[0]); got != c.changes {
			t.Errorf("audit entry of patch %d: %q, want %q", i, got, c.changes)
		}
	}

	_, err := admin.Patch(ctx, "a", []byte(`{"outflow":{"paused":"yes"}}`), "alice", testAt)
	se, ok := IsSpecError(err)
	if !ok || se.Problems[0].Field != "outflow.paused" {
		t.Fatalf("paused \"yes\": %v, want a spec error naming outflow.paused", err)
	}
	if !strings.Contains(se.Error(), "tenants.a.outflow.paused") {
		t.Errorf("paused \"yes\": %q, want the full key named", se.Error())
	}
}

// TestSpecPaused round-trips a paused spec, shaped and unlimited: the spec
// JSON always carries outflow.paused (false too), and decodes back.
func TestSpecPaused(t *testing.T) {
	t.Parallel()
	for _, o := range []config.Outflow{{Rate: 5, Paused: true}, {Paused: true}, {Rate: 5}} {
		in := config.Tenant{Outflow: o}.WithDefaults()
		b, err := EncodeSpec(in)
		if err != nil {
			t.Fatal(err)
		}
		want := `"paused":false`
		if o.Paused {
			want = `"paused":true`
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("EncodeSpec(%+v) = %s, want it to contain %s", o, b, want)
		}
		out, err := DecodeSpec("a", b)
		if err != nil || out.Outflow.Paused != o.Paused || out.Outflow.Shaped() != in.Outflow.Shaped() {
			t.Errorf("DecodeSpec(%s) = %+v, %v; want paused %v", b, out.Outflow, err, o.Paused)
		}
	}
}
