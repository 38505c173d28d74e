package tenants

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/config"
)

// quarantineRounds bounds the rounds of quarantine: each round sets aside at
// least one tenant, and a problem that outlives them is not the tenants'.
const quarantineRounds = 4

// quarantine makes a merged config that fails config.Validate (err) valid by
// setting aside the tenants its problems name, so one bad runtime record
// never freezes every other tenant's changes (before, any problem kept the
// whole running config: two admins racing to give one API key to two
// tenants left every later change of any tenant unapplied, on every
// instance, and a restart fell back to the file's tenants alone).
//
// A problem names the tenants in its key and in its message (a key held
// twice names both holders). Of those, the ones whose spec differs from
// prev (the running config) are set aside: the change that brought the
// problem, not the tenant that had the key first; when none changed (a new
// file did it), all of them. A tenant set aside keeps its running spec from
// prev, or is left out when prev has none. It returns the valid config and
// the tenants set aside, sorted, or ok false when problems outside the
// tenants remain (the caller keeps the running config, as before).
func quarantine(merged, prev *config.Config, err error) (out *config.Config, aside []string, ok bool) {
	cp := *merged
	cp.Tenants = maps.Clone(merged.Tenants)
	set := map[string]bool{}
	for range quarantineRounds {
		named := problemTenants(&cp, prev, err)
		if len(named) == 0 {
			return nil, nil, false
		}
		for _, id := range named {
			set[id] = true
			if t, had := prev.Tenants[id]; had {
				cp.Tenants[id] = t
			} else {
				delete(cp.Tenants, id)
			}
		}
		if err = cp.Validate(); err == nil {
			return &cp, slices.Sorted(maps.Keys(set)), true
		}
		prev = &config.Config{Tenants: map[string]config.Tenant{}} // a second round leaves them out
	}
	return nil, nil, false
}

// problemTenants returns the tenants of cfg that err's problems name (see
// quarantine), of each problem the ones whose spec is not prev's, or nil
// when a problem names none (it lies outside the tenants).
func problemTenants(cfg, prev *config.Config, err error) []string {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := map[string]bool{}
	for _, e := range errs {
		key, msg, _ := strings.Cut(strings.TrimPrefix(e.Error(), "config: "), ": ")
		ids := namedTenants(cfg, key, msg)
		if len(ids) == 0 {
			return nil
		}
		for _, id := range changedFrom(cfg, prev, ids) {
			out[id] = true
		}
	}
	return slices.Sorted(maps.Keys(out))
}

// namedTenants returns the tenants of cfg a problem's key and message name
// ("tenants.<id>" or "tenants.<id>.…"; the longest id when one id is a
// prefix of another, as ids may hold dots).
func namedTenants(cfg *config.Config, key, msg string) []string {
	var ids []string
	for _, s := range []string{key, msg} {
		best := ""
		for id := range cfg.Tenants {
			p := "tenants." + id
			if len(id) > len(best) && (strings.HasPrefix(s, p+".") || s == p || strings.Contains(s, " "+p+".") || strings.HasPrefix(s, p+"[")) {
				best = id
			}
		}
		if best != "" {
			ids = append(ids, best)
		}
	}
	return ids
}

// changedFrom returns the ids among ids whose spec in cfg differs from
// prev's (or that prev lacks); all of ids when none differs.
func changedFrom(cfg, prev *config.Config, ids []string) []string {
	var out []string
	for _, id := range ids {
		p, had := prev.Tenants[id]
		if !had || !reflect.DeepEqual(p, cfg.Tenants[id]) {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return ids
	}
	return out
}
