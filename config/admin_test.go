package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
)

func TestAdminTokens(t *testing.T) {
	t.Parallel()
	alice, bob := config.HashKey("alice-token"), config.HashKey("bob-token")
	cfg, err := config.Parse([]byte("ingest:\n  admin_tokens:\n    Alice: " + alice + "\n    bob: " + bob + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Alice": alice, "bob": bob}
	if diff := cmp.Diff(want, cfg.Ingest.AdminTokens); diff != "" {
		t.Errorf("admin_tokens (-want +got):\n%s", diff)
	}
}

func TestAdminTokensInvalid(t *testing.T) {
	t.Parallel()
	hash := config.HashKey("k")
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"plain token", "ingest: {admin_tokens: {alice: secret}}\n", `ingest.admin_tokens.alice: must be "sha256:"`},
		{"bad name", "ingest: {admin_tokens: {\"a b\": " + hash + "}}\n", "ingest.admin_tokens.a b: admin name must match"},
		{"same token twice", "ingest: {admin_tokens: {a: " + hash + ", b: " + hash + "}}\n", "ingest.admin_tokens.b: same token as ingest.admin_tokens.a"},
		{"tenant key as admin token", "ingest: {admin_tokens: {a: " + hash + "}}\ntenants: {t: {api_keys: [" + hash + "]}}\n",
			"ingest.admin_tokens.a: same key as tenants.t.api_keys[0]"},
		{"case-only duplicate names", "ingest: {admin_tokens: {a: " + hash + ", A: " + config.HashKey("x") + "}}\n", "differing only in case"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q) error:\n%v\nwant it to contain %q", tc.yaml, err, tc.want)
			}
		})
	}
}

func TestTenantWithDefaults(t *testing.T) {
	t.Parallel()
	off := false
	for _, tc := range []struct {
		name string
		in   config.Tenant
		want config.Tenant
	}{
		{
			name: "empty",
			in:   config.Tenant{},
			want: config.Tenant{Outflow: config.Outflow{Unlimited: true, Adaptive: ptr(true)}, Target: config.Target{Timeout: 10 * time.Second}, OnLimiterError: "allow"},
		},
		{
			name: "gcra and outflow",
			in: config.Tenant{
				Admission: config.Admission{Algorithm: "gcra", Limit: 10},
				JobTypes:  map[string]config.JobType{"encode": {Admission: config.Admission{Algorithm: "fixed_window", Limit: 2}}},
				Outflow:   config.Outflow{Rate: 0.5, Adaptive: &off},
			},
			want: config.Tenant{
				Admission: config.Admission{Algorithm: "gcra", Limit: 10, Period: time.Second, Burst: 10},
				JobTypes: map[string]config.JobType{"encode": {
					Admission: config.Admission{Algorithm: "fixed_window", Limit: 2, Period: time.Second, Burst: 2},
					Target:    config.Target{Timeout: 10 * time.Second},
				}},
				Outflow:        config.Outflow{Rate: 0.5, Capacity: 1, Adaptive: &off, MinRate: 0.05},
				Target:         config.Target{Timeout: 10 * time.Second},
				OnLimiterError: "allow",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := cloneTypes(tc.in.JobTypes)
			got := tc.in.WithDefaults()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WithDefaults (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.in.JobTypes); diff != "" {
				t.Errorf("WithDefaults modified its receiver's job types (-before +after):\n%s", diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func cloneTypes(m map[string]config.JobType) map[string]config.JobType {
	if m == nil {
		return nil
	}
	out := map[string]config.JobType{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
