package tenants

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
)

// ErrNotFound is returned for a tenant that exists neither in the
// configuration file nor as a runtime spec (or that was deleted).
var ErrNotFound = errors.New("tenants: no such tenant")

// View is one tenant as the admin API shows it.
type View struct {
	// ID is the tenant id.
	ID string
	// Source is SourceConfig or SourceRuntime.
	Source string
	// Spec is the tenant's effective spec, defaults applied.
	Spec config.Tenant
	// Version is the runtime record's version (0 for a file tenant never
	// changed at runtime).
	Version int64
}

// Result is the outcome of an admin write.
type Result struct {
	// View is the tenant after the write (for Delete, before it).
	View
	// Created says the tenant did not exist before (a PUT answers 201).
	Created bool
	// Old is the spec before the write; nil when Created.
	Old *config.Tenant
}

// maxWriteTries bounds the read-compute-write rounds of one admin write
// that loses compare-and-set races.
const maxWriteTries = 5

// Get returns tenant id as it is now, read from Redis (not from the
// registry's last merge), or ErrNotFound.
func (r *Registry) Get(ctx context.Context, id string) (View, error) {
	if !keys.ValidTenant(id) {
		return View{}, ErrNotFound
	}
	rec, err := r.store.Get(ctx, id)
	if err != nil {
		return View{}, err
	}
	v, ok := view(r.Base(), rec)
	if !ok {
		return View{}, ErrNotFound
	}
	return v, nil
}

// List returns every tenant as it is now, by id.
func (r *Registry) List(ctx context.Context) ([]View, error) {
	recs, err := r.store.List(ctx)
	if err != nil {
		return nil, err
	}
	base := r.Base()
	byID := map[string]Record{}
	for _, rec := range recs {
		byID[rec.Tenant] = rec
	}
	for id := range base.Tenants {
		if _, ok := byID[id]; !ok {
			byID[id] = Record{Tenant: id}
		}
	}
	out := make([]View, 0, len(byID))
	for _, rec := range byID {
		if v, ok := view(base, rec); ok {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// view is tenant rec.Tenant as base and its record make it.
func view(base *config.Config, rec Record) (View, bool) {
	v := View{ID: rec.Tenant, Version: rec.Version}
	switch {
	case rec.Spec != nil:
		v.Source, v.Spec = SourceRuntime, *rec.Spec
	case rec.Deleted:
		return View{}, false
	default:
		t, ok := base.Tenants[rec.Tenant]
		if !ok {
			return View{}, false
		}
		v.Source, v.Spec = SourceConfig, t
	}
	return v, true
}

// Put stores spec as tenant id's runtime spec (defaults applied), after
// checking the merged configuration with config.Validate (a *SpecError
// names each bad field). who is the admin's name for the audit entry, at
// its time.
func (r *Registry) Put(ctx context.Context, id string, spec config.Tenant, who string, at time.Time) (Result, error) {
	return r.write(ctx, id, who, at, func(cur *View) (Op, config.Tenant, error) {
		return OpPut, spec, nil
	})
}

// Patch applies a JSON merge patch (RFC 7396) to tenant id's current spec,
// the runtime one or the file's, and stores the result as Put does. A
// tenant that does not exist is ErrNotFound.
//
// A Put or Patch whose result (defaults applied) is the tenant's current
// spec writes nothing: the Result is the current view, version and source
// unchanged (a tenant of the file stays one), with no audit entry and no
// announcement.
func (r *Registry) Patch(ctx context.Context, id string, patch []byte, who string, at time.Time) (Result, error) {
	return r.write(ctx, id, who, at, func(cur *View) (Op, config.Tenant, error) {
		if cur == nil {
			return 0, config.Tenant{}, ErrNotFound
		}
		t, err := ApplyPatch(id, cur.Spec, patch)
		return OpPut, t, err
	})
}

// Delete removes tenant id: a tenant of the configuration file is hidden by
// a tombstone (it stays deleted across file reloads until a Put), a
// runtime-only tenant's spec is removed. A tenant that does not exist is
// ErrNotFound. Its queued jobs are kept.
func (r *Registry) Delete(ctx context.Context, id, who string, at time.Time) (Result, error) {
	return r.write(ctx, id, who, at, func(cur *View) (Op, config.Tenant, error) {
		if cur == nil {
			return 0, config.Tenant{}, ErrNotFound
		}
		if _, inFile := r.Base().Tenants[id]; inFile {
			return OpTombstone, config.Tenant{}, nil
		}
		return OpClear, config.Tenant{}, nil
	})
}

// write runs one admin change: read the record, let change compute the
// operation from the current view (nil when the tenant does not exist),
// validate the merged result, write with compare-and-set, and retry from
// the read when another write came first. The registry is refreshed before
// it returns, so this process enforces the change at once.
func (r *Registry) write(ctx context.Context, id, who string, at time.Time,
	change func(cur *View) (Op, config.Tenant, error)) (Result, error) {
	if !keys.ValidTenant(id) {
		return Result{}, specError(id, FieldError{Field: "id", Msg: fmt.Sprintf("tenant id must be %s (got %q)", keys.TenantRule, id)})
	}
	for try := 1; ; try++ {
		c, cur, prior, noop, err := r.plan(ctx, id, who, at, change)
		if err != nil {
			return Result{}, err
		}
		if noop {
			// A change that changes nothing writes nothing: no version, no
			// audit entry, no announcement.
			return Result{View: *cur, Old: &cur.Spec}, nil
		}
		out, err := r.store.Write(ctx, c)
		if errors.Is(err, ErrConflict) && try < maxWriteTries {
			continue
		}
		if err != nil && !errors.Is(err, ErrNotAnnounced) {
			return Result{}, err
		}
		if err != nil {
			r.log.Warn("tenants: change stored but not announced; other instances apply it at their next resync", "tenant", id, "err", err)
		}
		if c.Op == OpPut {
			if err := r.undoClash(ctx, c, prior, out.Version); err != nil {
				return Result{}, err
			}
		}
		if err := r.Refresh(ctx); err != nil {
			r.log.Warn("tenants: refresh after a write", "tenant", id, "err", err)
		}
		res := Result{Created: cur == nil, Old: c.Old}
		if c.Op == OpPut {
			res.View = View{ID: id, Source: SourceRuntime, Spec: c.Spec, Version: out.Version}
		} else {
			res.View = *cur
			res.Version = out.Version
		}
		return res, nil
	}
}

// plan reads tenant id's record (rec, returned) and computes the Change of
// one try of write: the operation change returns for the current view cur
// (nil when the tenant does not exist), validated against the merged
// configuration. noop says the change would leave the spec as it is (cur
// is then set).
func (r *Registry) plan(ctx context.Context, id, who string, at time.Time,
	change func(cur *View) (Op, config.Tenant, error)) (c Change, cur *View, rec Record, noop bool, err error) {
	recs, err := r.store.List(ctx)
	if err != nil {
		return Change{}, nil, rec, false, err
	}
	rec, err = r.store.Get(ctx, id)
	if err != nil {
		return Change{}, nil, rec, false, err
	}
	base := r.Base()
	if v, ok := view(base, rec); ok {
		cur = &v
	}
	op, spec, err := change(cur)
	if err != nil {
		return Change{}, nil, rec, false, err
	}
	c = Change{Tenant: id, Expect: rec.Version, Op: op, Who: who, At: at, Action: ActionDelete}
	if cur != nil {
		c.Old = &cur.Spec
	}
	if op != OpPut {
		return c, cur, rec, false, nil
	}
	spec = spec.WithDefaults()
	if err := Validate(Merge(base, replace(recs, Record{Tenant: id, Spec: &spec})), id); err != nil {
		return Change{}, nil, rec, false, err
	}
	c.Spec, c.Action = spec, ActionCreate
	if cur != nil {
		c.Action = ActionUpdate
	}
	return c, cur, rec, cur != nil && sameSpec(cur.Spec, spec), nil
}

// sameSpec reports whether a and b (defaults applied) are the same spec,
// as stored: their spec JSON is equal.
func sameSpec(a, b config.Tenant) bool {
	ea, err1 := EncodeSpec(a.WithDefaults())
	eb, err2 := EncodeSpec(b)
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}

// replace returns recs with next in place of its tenant's record.
func replace(recs []Record, next Record) []Record {
	out := make([]Record, 0, len(recs)+1)
	for _, r := range recs {
		if r.Tenant != next.Tenant {
			out = append(out, r)
		}
	}
	return append(out, next)
}

// Note records an operation on tenant id that changes no field of its spec
// (action ActionPurge, ActionDLQRedrive or ActionDLQDelete, touching
// count jobs) as one
// audit entry, by who at at. Like every audit entry it takes a version of
// the tenant (the spec stays as it is; a tenant of the file stays one).
func (r *Registry) Note(ctx context.Context, id, who string, at time.Time, action string, count int64) error {
	if !keys.ValidTenant(id) {
		return fmt.Errorf("tenants: note %q: invalid tenant id", id)
	}
	for try := 1; ; try++ {
		rec, err := r.store.Get(ctx, id)
		if err != nil {
			return err
		}
		_, err = r.store.Write(ctx, Change{Tenant: id, Expect: rec.Version, Op: OpNote, Who: who, Action: action, At: at, Count: count})
		switch {
		case errors.Is(err, ErrConflict) && try < maxWriteTries:
			continue
		case errors.Is(err, ErrNotAnnounced):
			r.log.Warn("tenants: audit note stored but not announced", "tenant", id, "err", err)
			return nil
		}
		return err
	}
}

// IsSpecError reports whether err is a *SpecError and returns it.
func IsSpecError(err error) (*SpecError, bool) {
	var se *SpecError
	ok := errors.As(err, &se)
	return se, ok
}
