// Package tenants keeps tenants that are changed at runtime, through the
// admin API, and brings every change to every ingest and drainer.
//
// A Store holds each runtime tenant in Redis: its spec (the JSON form of a
// config.Tenant, see EncodeSpec), a version, a tombstone for a deleted
// tenant of the configuration file, the flattened outflow fields the shared
// leaky bucket reads on every take, and a capped audit list. A Registry in
// every process merges the configuration file with those records (runtime
// wins, tombstones remove), validates the result with config.Validate and
// hands it to the service (ingest.Server.SetConfig, drainer.SetTenants). It
// learns of changes by Pub/Sub and, as a fallback, by polling a global
// version counter every 500 ms, so a change lands everywhere within 1 s even
// when a message is lost. docs/adr/0008-runtime-tenants.md records the
// choices.
package tenants

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
)

// ErrConflict is returned by Store.Write when the tenant's version is no
// longer the expected one: another write came first. Read again and retry.
var ErrConflict = errors.New("tenants: tenant changed meanwhile")

// Audit actions.
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionDelete = "delete"
	// ActionPurge is a purge of the tenant's queue (OpNote; Change.Count
	// jobs).
	ActionPurge = "purge"
)

// Op is what a Write does to a tenant's runtime record.
type Op int

// The write operations.
const (
	// OpPut stores Change.Spec and clears a tombstone.
	OpPut Op = iota + 1
	// OpTombstone removes the spec and hides the file's tenant.
	OpTombstone
	// OpClear removes the spec and any tombstone: the file's tenant, if
	// any, applies again.
	OpClear
	// OpNote changes nothing but the version: it records an audited
	// operation that is not a spec change (Registry.Note: a purge, a
	// dead-letter redrive or delete).
	OpNote
)

// Change is one admin write.
type Change struct {
	// Tenant is the tenant id (keys.ValidTenant).
	Tenant string
	// Expect is the record's Version the change was computed from; the
	// write fails with ErrConflict when it has moved on.
	Expect int64
	// Op is the operation.
	Op Op
	// Spec is the new spec for OpPut, defaults applied and validated.
	Spec config.Tenant
	// Who, Action, At and Old fill the audit entry.
	Who    string
	Action string
	At     time.Time
	Old    *config.Tenant
	// Count is an OpNote's count (AuditEntry.Count).
	Count int64
}

// Store reads and writes runtime tenants in Redis. Every write is one Lua
// script on the tenant's keys (spec, version, tombstone, flattened outflow
// fields and audit entry together, compare-and-set on the version), preceded
// by an SADD to the tenant set keys.Tenants and followed by an INCR of the
// global counter keys.TenantsVersion and a PUBLISH on keys.TenantsChannel,
// which are not tenant-scoped and so cannot share the script's cluster slot.
// It works on a standalone Redis and on a Cluster, and is safe for
// concurrent use.
type Store struct {
	rdb redis.UniversalClient
}

// StoreConfig configures a Store.
type StoreConfig struct {
	// Redis holds the runtime tenants: a standalone Redis or a Cluster.
	// Required.
	Redis redis.UniversalClient
}

// NewStore returns a Store on cfg.Redis. The only error is a missing Redis.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.Redis == nil {
		return nil, errors.New("tenants: new store: Redis is required")
	}
	return &Store{rdb: cfg.Redis}, nil
}

var recordFields = []string{"spec", "version", "deleted"}

// Get returns tenant's record; a tenant without runtime state has the zero
// Record with only Tenant set.
func (s *Store) Get(ctx context.Context, tenant string) (Record, error) {
	if !keys.ValidTenant(tenant) {
		return Record{}, fmt.Errorf("tenants: get %q: invalid tenant id", tenant)
	}
	vals, err := s.rdb.HMGet(ctx, keys.Override(tenant), recordFields...).Result()
	if err != nil {
		return Record{}, fmt.Errorf("tenants: get %s: %w", tenant, err)
	}
	return recordOf(tenant, vals)
}

// List returns the record of every tenant with a runtime spec or a
// tombstone, by tenant id.
func (s *Store) List(ctx context.Context) ([]Record, error) {
	ids, err := s.rdb.SMembers(ctx, keys.Tenants()).Result()
	if err != nil {
		return nil, fmt.Errorf("tenants: list: %w", err)
	}
	sort.Strings(ids)
	cmds := make([]*redis.SliceCmd, 0, len(ids))
	valid := ids[:0]
	pipe := s.rdb.Pipeline()
	for _, id := range ids {
		if !keys.ValidTenant(id) {
			continue // never written by a Store
		}
		valid = append(valid, id)
		cmds = append(cmds, pipe.HMGet(ctx, keys.Override(id), recordFields...))
	}
	if len(cmds) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("tenants: list: %w", err)
		}
	}
	out := make([]Record, 0, len(cmds))
	for i, c := range cmds {
		r, err := recordOf(valid[i], c.Val())
		if err != nil {
			return nil, err
		}
		if r.Spec != nil || r.Deleted {
			out = append(out, r)
		}
	}
	return out, nil
}

// recordOf decodes an HMGET of recordFields.
func recordOf(tenant string, vals []any) (Record, error) {
	r := Record{Tenant: tenant}
	if len(vals) != len(recordFields) {
		return Record{}, fmt.Errorf("tenants: read %s: %d fields, want %d", tenant, len(vals), len(recordFields))
	}
	if v, ok := vals[1].(string); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Record{}, fmt.Errorf("tenants: read %s: version %q: %w", tenant, v, err)
		}
		r.Version = n
	}
	if v, ok := vals[2].(string); ok && v == "1" {
		r.Deleted = true
	}
	if v, ok := vals[0].(string); ok && v != "" {
		t, err := decodeStored(tenant, []byte(v))
		if err != nil {
			return Record{}, fmt.Errorf("tenants: read %s: stored spec: %w", tenant, err)
		}
		t = t.WithDefaults()
		r.Spec, r.Deleted, r.raw = &t, false, v
	}
	return r, nil
}

// Write applies c, records its audit entry and announces it. It returns the
// new record, or ErrConflict (nothing written) when the tenant's version is
// not c.Expect. When the change is stored but could not be announced (the
// INCR or PUBLISH failed), it returns the record and an error wrapping
// ErrNotAnnounced: registries pick the change up at their next full resync.
func (s *Store) Write(ctx context.Context, c Change) (Record, error) {
	if !keys.ValidTenant(c.Tenant) {
		return Record{}, fmt.Errorf("tenants: write %q: invalid tenant id", c.Tenant)
	}
	w, err := tenantWriteOf(c)
	if err != nil {
		return Record{}, err
	}
	// The set first: a tenant with a spec is always listed, even when this
	// process dies right after the script. A listed tenant without a spec
	// (a lost race, a cleared record) is skipped by List.
	pre := s.rdb.Pipeline()
	pre.SAdd(ctx, keys.Tenants(), c.Tenant)
	pre.PExpire(ctx, keys.Tenants(), keys.OverrideTTL)
	if _, err := pre.Exec(ctx); err != nil {
		return Record{}, fmt.Errorf("tenants: write %s: %w", c.Tenant, err)
	}
	v, err := w.call().Run(ctx, s.rdb).Result()
	if err != nil {
		return Record{}, fmt.Errorf("tenants: write %s: %w", c.Tenant, err)
	}
	written, version, err := writeReply(v)
	if err != nil {
		return Record{}, fmt.Errorf("tenants: write %s: %w", c.Tenant, err)
	}
	if !written {
		return Record{}, fmt.Errorf("tenants: write %s: version %d, expected %d: %w", c.Tenant, version, c.Expect, ErrConflict)
	}
	rec := Record{Tenant: c.Tenant, Version: version, Deleted: c.Op == OpTombstone}
	if c.Op == OpPut {
		t := c.Spec
		rec.Spec, rec.raw = &t, w.spec
	}
	return rec, s.announce(ctx, rec)
}

// announce raises the global change counter and publishes rec's change, so
// every registry reloads. An error wraps ErrNotAnnounced.
func (s *Store) announce(ctx context.Context, rec Record) error {
	pipe := s.rdb.Pipeline()
	pipe.Incr(ctx, keys.TenantsVersion())
	pipe.PExpire(ctx, keys.TenantsVersion(), keys.OverrideTTL)
	pipe.Publish(ctx, keys.TenantsChannel(), rec.Tenant+" "+strconv.FormatInt(rec.Version, 10))
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("tenants: write %s: %w: %w", rec.Tenant, ErrNotAnnounced, err)
	}
	return nil
}

// ErrNotAnnounced marks a write that was stored but whose announcement (the
// global version INCR and the PUBLISH) failed.
var ErrNotAnnounced = errors.New("stored but not announced")

// Version returns the global change counter (keys.TenantsVersion); 0 when
// no change was ever made (or its key expired).
func (s *Store) Version(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, keys.TenantsVersion()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("tenants: version: %w", err)
	}
	return v, nil
}

// decodeStored decodes a stored spec. A spec stored before outflow.unlimited
// existed spells an unlimited outflow "rate": 0, which DecodeSpec refuses
// now; it reads as {"unlimited": true}, what it meant.
func decodeStored(tenant string, raw []byte) (config.Tenant, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return config.Tenant{}, specError(tenant, FieldError{Msg: "not JSON: " + err.Error()})
	}
	if o, ok := objectAt(doc, "outflow"); ok {
		if r, ok := o["rate"].(json.Number); ok && o["unlimited"] == nil {
			if f, err := r.Float64(); err == nil && f == 0 {
				delete(o, "rate")
				o["unlimited"] = true
			}
		}
	}
	return decodeDoc(tenant, doc)
}
