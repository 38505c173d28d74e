package tenants

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/config"
)

// quarantineRounds bounds the rounds of quarantine: each round strips at
// least one clashing key, and a problem that outlives them is not one it
// knows how to settle.
const quarantineRounds = 4

// sameKeyAs is config.Validate's message of an API key held twice.
const sameKeyAs = "same key as "

// quarantine makes the merged config that config.Validate refused (err)
// one to apply, so that one bad record never freezes every other tenant's
// changes (before, any problem kept the whole running config: two admins
// racing to give one API key to two tenants left every later change of
// any tenant unapplied, on every instance, and a restart fell back to the
// file's tenants alone):
//
//   - an API key that is also an admin token is taken from its tenant;
//   - an API key held by two tenants is taken from the one whose spec
//     differs from prev (the running config: the change that brought the
//     clash), or from both when neither or both changed (a registry just
//     started knows no running spec); each keeps the rest of its spec, so
//     a tenant paused at runtime stays paused;
//   - a problem wholly inside one tenant's own spec (stored by an older
//     version whose bounds today's refuse) is applied as stored, as it ran
//     before: its admission requests take the limiter's error path until
//     its next write fixes it, rather than the tenant vanishing;
//   - a problem outside the tenants is not settled: ok is false and the
//     caller keeps the running config, as before.
//
// It returns the config and what it did ("<tenant>: key <hash…> removed"),
// sorted.
func quarantine(merged, prev *config.Config, err error) (out *config.Config, did []string, ok bool) {
	cp := *merged
	cp.Tenants = maps.Clone(merged.Tenants)
	for range quarantineRounds {
		stripped, settled := stripClashes(&cp, prev, err)
		if !settled {
			return nil, nil, false
		}
		did = append(did, stripped...)
		if err = cp.Validate(); err == nil || len(stripped) == 0 {
			// Valid, or only the tenants' own problems are left.
			slices.Sort(did)
			return &cp, did, true
		}
	}
	return nil, nil, false
}

// stripClashes takes each API key that err's problems show held twice from
// the tenants changedFrom picks, and reports what it took. settled is false
// when a problem names no tenant.
func stripClashes(cfg, prev *config.Config, err error) (stripped []string, settled bool) {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		key, msg, _ := strings.Cut(strings.TrimPrefix(e.Error(), "config: "), ": ")
		other, clash := strings.CutPrefix(msg, sameKeyAs)
		other, _, _ = strings.Cut(other, ";")
		first := namedTenant(cfg, other)
		holder := namedTenant(cfg, key)
		if holder == "" && clash && first != "" && strings.HasPrefix(key, "ingest.admin_tokens.") {
			// An admin token equal to a tenant's key: the tenant's key gives way.
			if hash, found := keyAt(cfg, first, other); found && removeKey(cfg, first, hash) {
				stripped = append(stripped, first+": key "+hash[:min(len(hash), 15)]+"… removed (an admin token)")
			}
			continue
		}
		if holder == "" {
			return nil, false
		}
		hash, found := keyAt(cfg, holder, key)
		if !clash || first == "" || !found {
			continue // the tenant's own problem: applied as stored
		}
		for _, id := range changedFrom(cfg, prev, []string{holder, first}) {
			if removeKey(cfg, id, hash) {
				stripped = append(stripped, id+": key "+hash[:min(len(hash), 15)]+"… removed (held by two tenants)")
			}
		}
	}
	return stripped, true
}

// namedTenant returns the tenant of cfg a problem key ("tenants.<id>" or
// "tenants.<id>.…") names, the longest id when one is a prefix of another
// (ids may hold dots), or "".
func namedTenant(cfg *config.Config, key string) string {
	best := ""
	for id := range cfg.Tenants {
		p := "tenants." + id
		if len(id) > len(best) && (key == p || strings.HasPrefix(key, p+".")) {
			best = id
		}
	}
	return best
}

// keyAt returns the API key at the problem key "tenants.<id>.api_keys[i]".
func keyAt(cfg *config.Config, id, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "tenants."+id+".api_keys[")
	if !ok {
		return "", false
	}
	i, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	keys := cfg.Tenants[id].APIKeys
	if err != nil || i < 0 || i >= len(keys) {
		return "", false
	}
	return keys[i], true
}

// removeKey takes hash (any case) from tenant id's API keys, reporting
// whether it held it.
func removeKey(cfg *config.Config, id, hash string) bool {
	t := cfg.Tenants[id]
	kept := make([]string, 0, len(t.APIKeys))
	for _, k := range t.APIKeys {
		if !strings.EqualFold(k, hash) {
			kept = append(kept, k)
		}
	}
	if len(kept) == len(t.APIKeys) {
		return false
	}
	t.APIKeys = kept
	cfg.Tenants[id] = t
	return true
}

// changedFrom returns the ids among ids whose spec in cfg differs from
// prev's (or that prev lacks); all of ids when none differs or all do.
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
