package tenants

import (
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// This file holds the Go twins of the two scripts the Store runs: typed
// arguments building each lua.Call, and the parser of each reply, whose
// errors wrap lua.ErrReply and name the script.

// tenantWrite is one call of tenant_write.lua: a compare-and-set of the
// tenant's override hash from version expect, with its audit entry.
type tenantWrite struct {
	tenant string
	expect int64
	// mode is "put", "tombstone" or "clear".
	mode string
	// spec is the spec JSON, rate and capacity its flattened outflow fields
	// ("" for none); all three only for put.
	spec, rate, capacity string
	// audit is the audit entry JSON.
	audit string
}

// writeModes are tenant_write.lua's modes by Op.
var writeModes = map[Op]string{OpPut: "put", OpTombstone: "tombstone", OpClear: "clear", OpNote: "note"}

// tenantWriteOf returns the call that stores c, or an error for an unknown
// op or a spec or audit entry that does not encode.
func tenantWriteOf(c Change) (tenantWrite, error) {
	w := tenantWrite{tenant: c.Tenant, expect: c.Expect, mode: writeModes[c.Op]}
	if w.mode == "" {
		return w, fmt.Errorf("tenants: write %s: unknown op %d", c.Tenant, c.Op)
	}
	if c.Op == OpPut {
		b, err := EncodeSpec(c.Spec)
		if err != nil {
			return w, err
		}
		w.spec = string(b)
		if c.Spec.Outflow.Shaped() {
			w.rate = strconv.FormatFloat(c.Spec.Outflow.Rate, 'f', -1, 64)
		}
		if c.Spec.Outflow.Capacity > 0 {
			w.capacity = strconv.FormatFloat(c.Spec.Outflow.Capacity, 'f', -1, 64)
		}
	}
	audit, err := c.auditEntry(w.spec)
	if err != nil {
		return w, fmt.Errorf("tenants: write %s: %w", c.Tenant, err)
	}
	w.audit = audit
	return w, nil
}

// call is w's lua.Call.
func (w tenantWrite) call() lua.Call {
	return lua.Call{
		Script: lua.TenantWrite,
		Keys:   []string{keys.Override(w.tenant), keys.Audit(w.tenant)},
		Args: []any{w.expect, w.mode, w.spec, w.rate, w.capacity, w.audit,
			keys.OverrideTTL.Milliseconds(), keys.AuditMaxEntries, keys.AuditMaxBytes},
	}
}

// writeReply reads tenant_write.lua's reply {1, new version} (written) or
// {0, current version} (the expected version had moved on).
func writeReply(v any) (written bool, version int64, err error) {
	s := lua.TenantWrite
	res, err := s.Ints(v, 2)
	if err != nil {
		return false, 0, err
	}
	if res[0] != 0 && res[0] != 1 {
		return false, 0, s.ReplyError("%v, want {1|0, version}", res)
	}
	return res[0] == 1, res[1], nil
}

// auditPageCall is the call of audit_page.lua reading the page of tenant's
// audit list below version before (0: the newest), at most limit entries
// or auditReadBytes.
func auditPageCall(tenant string, before int64, limit int) lua.Call {
	return lua.Call{
		Script: lua.AuditPage,
		Keys:   []string{keys.Override(tenant), keys.Audit(tenant)},
		Args:   []any{before, limit, auditReadBytes},
	}
}

// auditPageReply is audit_page.lua's reply: the hash's version, the index
// the page starts at, the list's length and the page's entries as stored.
type auditPageReply struct {
	head, start, length int64
	entries             []string
}

// pageReply reads audit_page.lua's reply {head, start, length, entry...}.
func pageReply(v any) (auditPageReply, error) {
	s := lua.AuditPage
	arr, err := s.Array(v, 3, -1)
	if err != nil {
		return auditPageReply{}, err
	}
	nums, err := s.Ints(arr[:3], 3)
	if err != nil {
		return auditPageReply{}, err
	}
	entries, err := s.Strings(arr[3:])
	if err != nil {
		return auditPageReply{}, err
	}
	return auditPageReply{head: nums[0], start: nums[1], length: nums[2], entries: entries}, nil
}
