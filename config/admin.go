package config

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// validateAdminTokens checks ingest.admin_tokens: each name a valid id, each
// value "sha256:" and 64 hex digits, no hash given twice, and no hash equal
// to a tenant's API key (a tenant key must never open the admin API).
func (c *Config) validateAdminTokens(bad badFunc) {
	names := make([]string, 0, len(c.Ingest.AdminTokens))
	for name := range c.Ingest.AdminTokens {
		names = append(names, name)
	}
	sort.Strings(names)
	tenantKeys := map[string]string{}
	for tenant, t := range c.Tenants {
		for i, k := range t.APIKeys {
			tenantKeys[strings.ToLower(k)] = fmt.Sprintf("tenants.%s.api_keys[%d]", tenant, i)
		}
	}
	seen := map[string]string{}
	for _, name := range names {
		p := "ingest.admin_tokens." + name
		h := strings.ToLower(c.Ingest.AdminTokens[name])
		switch {
		case !nameRe.MatchString(name):
			bad(p, "admin name must match [A-Za-z0-9._-]{1,64}")
		case !validKeyHash(h):
			bad(p, "must be \"sha256:\" and 64 hex digits (the SHA-256 of the token; see sluicectl hash-key)")
		case seen[h] != "":
			bad(p, "same token as %s", seen[h])
		case tenantKeys[h] != "":
			bad(p, "same key as %s; a tenant key must not be an admin token", tenantKeys[h])
		default:
			seen[h] = p
		}
	}
}

// restoreAdminNames renames ingest.admin_tokens to their spelling in raw
// (viper folds keys to lower case; the names are what the audit log shows).
func restoreAdminNames(raw []byte, cfg *Config) error {
	if len(raw) == 0 || len(cfg.Ingest.AdminTokens) == 0 {
		return nil
	}
	var doc struct {
		Ingest struct {
			AdminTokens map[string]any `yaml:"admin_tokens"`
		} `yaml:"ingest"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("config: parse yaml: %w", err)
	}
	out := make(map[string]string, len(cfg.Ingest.AdminTokens))
	seen := map[string]string{}
	for name := range doc.Ingest.AdminTokens {
		low := strings.ToLower(name)
		if other, dup := seen[low]; dup {
			return fmt.Errorf("config: ingest.admin_tokens.%s: same name as ingest.admin_tokens.%s but for case; names differing only in case are not allowed", name, other)
		}
		seen[low] = name
		if v, ok := cfg.Ingest.AdminTokens[low]; ok {
			out[name] = v
		}
	}
	cfg.Ingest.AdminTokens = out
	return nil
}

// WithDefaults returns t with the defaults config.Load gives a tenant:
// admission period 1s and burst = limit (when an algorithm is set), outflow
// capacity max(1, rate), adaptive on, min_rate rate/10, target timeouts 10s,
// on_limiter_error allow. t itself (and its JobTypes map) is not modified.
// The admin API stores tenant specs with these defaults applied, so a
// stored spec reads exactly as it is enforced.
func (t Tenant) WithDefaults() Tenant {
	t.JobTypes = maps.Clone(t.JobTypes)
	c := Config{Tenants: map[string]Tenant{"t": t}}
	c.applyDefaults()
	return c.Tenants["t"]
}
