package tenants

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/keys"
)

// Audit bounds. An entry holds what a change did to the spec (AuditChange,
// one per field), never the specs themselves, and is built so that its JSON
// is at most AuditEntryMaxBytes whatever the specs are; tenant_write.lua
// keeps a tenant's newest entries within keys.AuditMaxEntries and
// keys.AuditMaxBytes.
const (
	// AuditValueMaxBytes bounds a change's path, old and new value (and an
	// entry's who): a longer one is cut at a UTF-8 boundary so that its JSON
	// string, quotes included, is at most this many bytes, and the change is
	// marked truncated.
	AuditValueMaxBytes = 256
	// AuditEntryMaxBytes bounds one entry's JSON. Changes are listed by path
	// while they fit; the rest are left out and the entry is marked
	// truncated (ChangesTotal still counts them).
	AuditEntryMaxBytes = 4096
	// AuditPageMax is the most entries one page holds (Store.Audit and
	// GET /admin/v1/tenants/{id}/audit?limit=), so a page's entries are at
	// most AuditPageMax × AuditEntryMaxBytes of JSON.
	AuditPageMax = 100
	// auditReadBytes stops a page early once the stored entries it read
	// reach this many bytes. Entries written by this version are bounded,
	// so it only binds for entries of the old format (whole specs) still in
	// Redis; such a page is shorter and has a next cursor.
	auditReadBytes = 1 << 20
)

// AuditEntry is one admin change of a tenant, as kept in its audit list
// (keys.Audit, newest first) and shown by the admin API.
type AuditEntry struct {
	// At is when the change was made (the serving ingest's clock).
	At time.Time `json:"at"`
	// Who is the admin token's name (ingest.admin_tokens).
	Who string `json:"who"`
	// Action is create, update or delete (a spec change), or purge,
	// dlq_redrive or dlq_delete (a note: no Changes, Count jobs).
	Action string `json:"action"`
	// Version is the tenant's version after the change: every version of a
	// tenant has exactly one entry, so it identifies the entry (the cursor
	// of the next page is the last entry's version).
	Version int64 `json:"version"`
	// Changes lists the fields the change set, changed or removed, by path;
	// empty when it changed nothing. A create lists every field of the new
	// spec, a delete every field of the old one.
	Changes []AuditChange `json:"changes"`
	// ChangesTotal is how many fields changed: len(Changes) unless
	// Truncated.
	ChangesTotal int `json:"changes_total"`
	// Truncated says Changes lists only the first changes, by path, that fit
	// in AuditEntryMaxBytes.
	Truncated bool `json:"truncated"`
	// Count is how many jobs an operation on the tenant's jobs touched
	// (actions dlq_redrive, dlq_delete; they change no field).
	Count int64 `json:"count,omitempty"`
}

// Audited operations that are not spec changes (Registry.Note).
const (
	// ActionDLQRedrive: dead letters put back on the queue (Count).
	ActionDLQRedrive = "dlq_redrive"
	// ActionDLQDelete: dead letters deleted (Count).
	ActionDLQDelete = "dlq_delete"
)

// AuditChange is one field of the spec that a change set, changed or
// removed.
type AuditChange struct {
	// Path is the field's dotted path in the spec's JSON, as the admin API's
	// problem fields name it ("outflow.rate",
	// "job_types.email.admission.limit"); a list is one field ("api_keys").
	Path string `json:"path"`
	// Old is the field's value before the change as JSON text ("5",
	// `"1m0s"`, `["sha256:…"]`); nil when it was not set.
	Old *string `json:"old"`
	// New is its value after the change as JSON text; nil when removed.
	New *string `json:"new"`
	// Truncated says Path, Old or New was cut to AuditValueMaxBytes.
	Truncated bool `json:"truncated"`
}

// AuditPage is one page of a tenant's audit, newest first.
type AuditPage struct {
	// Entries are the page's entries, newest first.
	Entries []AuditEntry
	// Next is the cursor of the next page: pass it as before. It is the
	// version of the page's last entry, so appends meanwhile neither shift
	// nor repeat entries. 0 when there are no older entries.
	Next int64
}

// Audit returns one page of tenant's audit, newest first: at most limit
// entries (1 to AuditPageMax; others are clamped), those with a version
// below before, or the newest when before is 0. Follow AuditPage.Next until
// it is 0 to read every entry exactly once. Entries of the old format (the
// whole old and new spec) are shown as their changes; an entry that is not
// JSON is skipped.
//
// One round trip (audit_page.lua): the entry of version v sits at index
// head - v, head being the override hash's version, since the write script
// pushes one entry per version and trims only the oldest. When the entries
// read there do not have the expected versions (the list was written some
// other way), the page is found by reading the list from the newest entry.
func (s *Store) Audit(ctx context.Context, tenant string, before int64, limit int) (AuditPage, error) {
	if !keys.ValidTenant(tenant) {
		return AuditPage{}, fmt.Errorf("tenants: audit %q: invalid tenant id", tenant)
	}
	limit = min(max(limit, 1), AuditPageMax)
	if before < 0 {
		before = 0
	}
	v, err := auditPageCall(tenant, before, limit).Run(ctx, s.rdb).Result()
	if err != nil {
		return AuditPage{}, fmt.Errorf("tenants: audit %s: %w", tenant, err)
	}
	r, err := pageReply(v)
	if err != nil {
		return AuditPage{}, fmt.Errorf("tenants: audit %s: %w", tenant, err)
	}
	head, start, length, raw := r.head, r.start, r.length, r.entries
	want := head - start // version of the entry at index start
	page := AuditPage{Entries: make([]AuditEntry, 0, len(raw))}
	for i, v := range raw {
		e, ok := decodeEntry(v)
		if !ok || e.Version != want-int64(i) {
			return s.auditScan(ctx, tenant, before, limit)
		}
		page.Entries = append(page.Entries, e)
	}
	if n := len(page.Entries); n > 0 && start+int64(n) < length && page.Entries[n-1].Version > 1 {
		page.Next = page.Entries[n-1].Version
	}
	return page, nil
}

// auditScanChunk is how many entries one LRANGE of auditScan reads.
const auditScanChunk = 32

// auditScan is Audit for a list whose versions are not where the page
// script expects them: it reads the list from the newest entry and keeps,
// in list order, the entries with a version below before (every one when
// before is 0), at most limit of them or auditReadBytes of stored entries.
func (s *Store) auditScan(ctx context.Context, tenant string, before int64, limit int) (AuditPage, error) {
	page := AuditPage{Entries: []AuditEntry{}}
	read := 0
	for i := int64(0); ; i += auditScanChunk {
		vals, err := s.rdb.LRange(ctx, keys.Audit(tenant), i, i+auditScanChunk-1).Result()
		if err != nil {
			return AuditPage{}, fmt.Errorf("tenants: audit %s: %w", tenant, err)
		}
		for _, v := range vals {
			e, ok := decodeEntry(v)
			if !ok || (before > 0 && e.Version >= before) {
				continue
			}
			if len(page.Entries) == limit || (read >= auditReadBytes && len(page.Entries) > 0) {
				page.Next = page.Entries[len(page.Entries)-1].Version
				return page, nil
			}
			page.Entries = append(page.Entries, e)
			read += len(v)
		}
		if len(vals) < auditScanChunk {
			return page, nil
		}
	}
}

// storedEntry is an entry as stored: this version's, or the old format's
// with the whole old and new spec (no changes).
type storedEntry struct {
	AuditEntry
	Old json.RawMessage `json:"old"`
	New json.RawMessage `json:"new"`
}

// decodeEntry decodes a stored entry, converting one of the old format to
// its changes; ok is false for one that is not a JSON object.
func decodeEntry(v string) (AuditEntry, bool) {
	var se storedEntry
	if err := json.Unmarshal([]byte(v), &se); err != nil {
		return AuditEntry{}, false
	}
	if se.Changes != nil {
		return se.AuditEntry, true
	}
	e, _, err := newAuditEntry(se.At, se.Who, se.Action, se.Version, se.Old, se.New)
	if err != nil {
		return AuditEntry{}, false
	}
	return e, true
}

// newAuditEntry builds the entry of a change from old to new (each a spec's
// JSON, or nil/null for none) and encodes it; the encoding is at most
// AuditEntryMaxBytes.
func newAuditEntry(at time.Time, who, action string, version int64, old, new []byte) (AuditEntry, []byte, error) {
	changes, err := specChanges(old, new)
	if err != nil {
		return AuditEntry{}, nil, err
	}
	who, _ = clip(who)
	e := AuditEntry{At: at.UTC(), Who: who, Action: action, Version: version, Changes: []AuditChange{}, ChangesTotal: len(changes)}
	b, err := json.Marshal(e) // "truncated":false, a byte longer than true
	if err != nil {
		return AuditEntry{}, nil, fmt.Errorf("tenants: audit entry: %w", err)
	}
	size := len(b)
	for i, c := range changes {
		cb, err := json.Marshal(c)
		if err != nil {
			return AuditEntry{}, nil, fmt.Errorf("tenants: audit entry: %w", err)
		}
		add := len(cb)
		if i > 0 {
			add++ // the comma
		}
		if size+add > AuditEntryMaxBytes {
			e.Truncated = true
			break
		}
		size += add
		e.Changes = append(e.Changes, c)
	}
	if b, err = json.Marshal(e); err != nil {
		return AuditEntry{}, nil, fmt.Errorf("tenants: audit entry: %w", err)
	}
	if len(b) > AuditEntryMaxBytes { // cannot happen: sizes were added up above
		return AuditEntry{}, nil, fmt.Errorf("tenants: audit entry of %d bytes, the bound is %d", len(b), AuditEntryMaxBytes)
	}
	return e, b, nil
}

// specChanges lists the leaves that differ between two specs' JSON, by
// path, each clipped to AuditValueMaxBytes.
func specChanges(old, new []byte) ([]AuditChange, error) {
	a, err := flattenJSON(old)
	if err != nil {
		return nil, fmt.Errorf("tenants: audit: old spec: %w", err)
	}
	b, err := flattenJSON(new)
	if err != nil {
		return nil, fmt.Errorf("tenants: audit: new spec: %w", err)
	}
	var out []AuditChange
	add := func(path string, va, vb *string) {
		c := AuditChange{Old: va, New: vb}
		var cut bool
		c.Path, cut = clip(path)
		c.Truncated = cut
		for _, v := range []**string{&c.Old, &c.New} {
			if *v != nil {
				s, cut := clip(**v)
				*v, c.Truncated = &s, c.Truncated || cut
			}
		}
		out = append(out, c)
	}
	for p, va := range a {
		if vb, ok := b[p]; !ok {
			add(p, &va, nil)
		} else if va != vb {
			add(p, &va, &vb)
		}
	}
	for p, vb := range b {
		if _, ok := a[p]; !ok {
			add(p, nil, &vb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// flattenJSON maps every leaf of a JSON object to its dotted path and its
// JSON text; lists are leaves. Empty, null and absent input is no leaves.
func flattenJSON(raw []byte) (map[string]string, error) {
	out := map[string]string{}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return out, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	var walk func(prefix string, v any) error
	walk = func(prefix string, v any) error {
		if obj, ok := v.(map[string]any); ok && (len(obj) > 0 || prefix == "") {
			for k, child := range obj {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				if err := walk(p, child); err != nil {
					return err
				}
			}
			return nil
		}
		if prefix == "" {
			return fmt.Errorf("a spec is a JSON object, not %T", v)
		}
		j, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out[prefix] = string(j)
		return nil
	}
	if err := walk("", v); err != nil {
		return nil, err
	}
	return out, nil
}

// clip returns the longest prefix of s, cut at a UTF-8 boundary, whose JSON
// string (quotes included) is at most AuditValueMaxBytes, and whether it
// cut anything. The length of each rune's escape is counted as
// encoding/json writes it, or more.
func clip(s string) (string, bool) {
	n := 2 // the quotes
	for i, r := range s {
		size := utf8.RuneLen(r)
		switch {
		case r == utf8.RuneError:
			size = 6 // \ufffd
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
			size = 2
		case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
			size = 6 // \u00XX; \b and \f may be shorter
		}
		if n+size > AuditValueMaxBytes {
			return s[:i], true
		}
		n += size
	}
	return s, false
}

// auditEntry encodes c's audit entry: the changes from c.Old to spec (the
// new spec's JSON, "" for none), at most AuditEntryMaxBytes.
func (c Change) auditEntry(spec string) (string, error) {
	if c.Op == OpNote {
		who, _ := clip(c.Who)
		b, err := json.Marshal(AuditEntry{At: c.At.UTC(), Who: who, Action: c.Action, Version: c.Expect + 1,
			Changes: []AuditChange{}, Count: c.Count})
		if err != nil {
			return "", fmt.Errorf("tenants: audit entry: %w", err)
		}
		return string(b), nil
	}
	var old []byte
	if c.Old != nil {
		b, err := EncodeSpec(*c.Old)
		if err != nil {
			return "", err
		}
		old = b
	}
	_, b, err := newAuditEntry(c.At, c.Who, c.Action, c.Expect+1, old, []byte(spec))
	if err != nil {
		return "", err
	}
	return string(b), nil
}
