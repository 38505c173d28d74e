package tenants

import (
	"maps"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/config"
)

// Sources of a tenant in the merged configuration.
const (
	// SourceConfig is a tenant of the configuration file, unchanged.
	SourceConfig = "config"
	// SourceRuntime is a tenant whose spec was set through the admin API;
	// it replaces the file's tenant of the same id, if any.
	SourceRuntime = "runtime"
)

// Record is a tenant's runtime state in Redis (keys.Override).
type Record struct {
	// Tenant is the tenant id.
	Tenant string
	// Spec is the runtime spec (defaults applied); nil when there is none.
	Spec *config.Tenant
	// Deleted is a tombstone: the tenant of the configuration file with this
	// id is removed. Never set together with Spec.
	Deleted bool
	// Version counts the tenant's admin writes; it only grows.
	Version int64
	// raw is the stored spec JSON, compared to tell whether anything changed.
	raw string
}

// Merge returns base with the runtime records laid over it: a record with a
// Spec replaces or adds its tenant, a tombstone removes the file's tenant.
// Every other section of base is kept as it is. Neither base nor recs is
// modified. When no record sets a spec or a tombstone (no runtime change,
// the common case) the result shares base's tenants map instead of copying
// it, so a drainer of 10,000 file tenants holds one map fewer; both configs
// are read-only once built (Registry.Config), so sharing is safe.
func Merge(base *config.Config, recs []Record) *config.Config {
	out := *base
	if out.Tenants == nil {
		out.Tenants = map[string]config.Tenant{}
	}
	if !changesTenants(recs) {
		return &out
	}
	out.Tenants = maps.Clone(out.Tenants)
	for _, r := range recs {
		switch {
		case r.Spec != nil:
			out.Tenants[r.Tenant] = *r.Spec
		case r.Deleted:
			delete(out.Tenants, r.Tenant)
		}
	}
	return &out
}

// changesTenants reports whether a record sets a spec or a tombstone.
func changesTenants(recs []Record) bool {
	for _, r := range recs {
		if r.Spec != nil || r.Deleted {
			return true
		}
	}
	return false
}

// Validate checks the merged configuration cfg with config.Validate and
// returns its problems as a *SpecError of tenant id: problems under
// "tenants.<id>." name the field inside the spec ("outflow.rate"), others
// (another tenant holding the same API key) keep their full key. The
// message of each is config.Validate's, e.g.
// "tenants.acme.admission.limit: must be >= 1 (got 0)".
//
// A problem that lies wholly inside another tenant (a runtime spec stored
// by an older version that today's bounds refuse) is not this write's and
// does not block it; that tenant's own next write must fix it.
func Validate(cfg *config.Config, id string) error {
	err := cfg.Validate()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	se := &SpecError{Tenant: id}
	own := "tenants." + id
	for _, e := range errs {
		key, msg, _ := strings.Cut(strings.TrimPrefix(e.Error(), "config: "), ": ")
		mine := key == own || strings.HasPrefix(key, own+".") || strings.Contains(msg, own+".")
		if strings.HasPrefix(key, "tenants.") && !mine {
			continue // another tenant's own problem
		}
		field := key
		if key == own {
			field = ""
		} else if f, ok := strings.CutPrefix(key, own+"."); ok {
			field = f
		}
		se.Problems = append(se.Problems, FieldError{Field: field, Key: key, Msg: msg})
	}
	if len(se.Problems) == 0 {
		return nil
	}
	// This tenant's problems first, each group in config.Validate's order
	// (which checks a tenant's fields in a fixed order: rate before the
	// min_rate derived from it).
	sort.SliceStable(se.Problems, func(i, j int) bool {
		oi := se.Problems[i].Key == own || strings.HasPrefix(se.Problems[i].Key, own+".")
		oj := se.Problems[j].Key == own || strings.HasPrefix(se.Problems[j].Key, own+".")
		return oi && !oj
	})
	return se
}
