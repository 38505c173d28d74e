package boot

import (
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

// TestRevokeTimeout: kafka.revoke_timeout 0 is the longest delivery
// timeout of the configured tenants (their job types' too) + 1s, at least
// 5s; a configured value is kept.
func TestRevokeTimeout(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Tenants: map[string]config.Tenant{
		"a": {Target: config.Target{Timeout: 2 * time.Second}},
		"b": {JobTypes: map[string]config.JobType{"slow": {Target: config.Target{Timeout: 40 * time.Second}}}},
	}}
	if got := revokeTimeout(cfg); got != 41*time.Second {
		t.Errorf("auto revoke timeout = %v, want 41s", got)
	}
	if got := revokeTimeout(&config.Config{Tenants: map[string]config.Tenant{"d": {}}}); got != 11*time.Second {
		t.Errorf("a tenant with the default 10s target = %v, want 11s", got)
	}
	if got := revokeTimeout(&config.Config{Tenants: map[string]config.Tenant{"a": {Target: config.Target{Timeout: time.Second}}}}); got != 5*time.Second {
		t.Errorf("one tenant with a 1s target = %v, want 5s (the floor)", got)
	}
	cfg.Kafka.RevokeTimeout = 3 * time.Second
	if got := revokeTimeout(cfg); got != 3*time.Second {
		t.Errorf("configured revoke timeout = %v, want 3s", got)
	}
}

func TestInstance(t *testing.T) {
	host, _ := os.Hostname()
	for id, want := range map[string]string{"auto": host + ":8081", "none": "", "drainer-3": "drainer-3"} {
		cfg := &config.Config{}
		cfg.Kafka.InstanceID, cfg.Drainer.Listen = id, "127.0.0.1:8081"
		if got := instance(cfg, nil); got != want {
			t.Errorf("instance(%q) = %q, want %q", id, got, want)
		}
	}
	// auto with port 0 would give every drainer of the host "host:0": off.
	for _, listen := range []string{"127.0.0.1:0", ":0", ""} {
		cfg := &config.Config{}
		cfg.Kafka.InstanceID, cfg.Drainer.Listen = "auto", listen
		if got := instance(cfg, nil); got != "" {
			t.Errorf("instance(auto) with drainer.listen %q = %q, want \"\" (off)", listen, got)
		}
	}
}
