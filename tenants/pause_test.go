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

// TestPatchDefaultsFollow: the probe's sequences. A runtime tenant put with
// gcra limit 100 (burst left out: 100) and patched to limit 10 gets burst
// 10, as the same edit of the file gives; a file tenant at rate 5 (capacity
// and min_rate left out: 5 and 0.5) patched to rate 0.1 is stored with
// capacity 1 and min_rate 0.01 (it was refused: min_rate 0.5 above the
// rate); a burst set apart from its limit stays.
func TestPatchDefaultsFollow(t *testing.T) {
	_, rdb := privateRedis(t)
	ctx := context.Background()
	admin, _ := startRegistry(t, rdb, baseConfig(t, fileTenant("a", 5)), RegistryConfig{})

	spec := config.Tenant{Admission: config.Admission{Algorithm: "gcra", Limit: 100, Period: time.Second}}
	if _, err := admin.Put(ctx, "f", spec, "alice", testAt); err != nil {
		t.Fatal(err)
	}
	res, err := admin.Patch(ctx, "f", []byte(`{"admission":{"limit":10}}`), "alice", testAt)
	if err != nil || res.Spec.Admission.Limit != 10 || res.Spec.Admission.Burst != 10 {
		t.Fatalf("patch limit 100 → 10: %+v, %v; want limit and burst 10", res.Spec.Admission, err)
	}
	res, err = admin.Patch(ctx, "f", []byte(`{"admission":{"limit":20,"burst":3}}`), "alice", testAt)
	if err == nil {
		res, err = admin.Patch(ctx, "f", []byte(`{"admission":{"limit":30}}`), "alice", testAt)
	}
	if err != nil || res.Spec.Admission.Limit != 30 || res.Spec.Admission.Burst != 3 {
		t.Errorf("patch limit with burst 3 set: %+v, %v; want limit 30, burst 3 kept", res.Spec.Admission, err)
	}

	res, err = admin.Patch(ctx, "a", []byte(`{"outflow":{"rate":0.1}}`), "alice", testAt)
	if o := res.Spec.Outflow; err != nil || o.Rate != 0.1 || o.Capacity != 1 || o.MinRate != 0.1/10 {
		t.Errorf("patch rate 5 → 0.1: %+v, %v; want capacity 1, min_rate 0.01", o, err)
	}
	res, err = admin.Patch(ctx, "a", []byte(`{"outflow":{"rate":50}}`), "alice", testAt)
	if o := res.Spec.Outflow; err != nil || o.Capacity != 50 || o.MinRate != 5 {
		t.Errorf("patch rate 0.1 → 50: %+v, %v; want capacity 50, min_rate 5", o, err)
	}
}
