package tenants

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/lua"
)

// TestWriteReply: {1, v} is written, {0, v} a conflict; any other shape is
// an error wrapping lua.ErrReply that names tenant_write.lua.
func TestWriteReply(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		reply   any
		written bool
		version int64
	}{{[]any{int64(1), int64(4)}, true, 4}, {[]any{int64(0), int64(9)}, false, 9}} {
		written, version, err := writeReply(c.reply)
		if err != nil || written != c.written || version != c.version {
			t.Errorf("writeReply(%v) = %v, %d, %v; want %v, %d, nil", c.reply, written, version, err, c.written, c.version)
		}
	}
	for _, c := range []struct {
		name  string
		reply any
		want  string
	}{
		{"not an array", int64(1), "want an array"},
		{"short", []any{int64(1)}, "1 elements, want 2"},
		{"string element", []any{int64(1), "4"}, "element 2 is string"},
		{"flag", []any{int64(2), int64(4)}, "want {1|0, version}"},
	} {
		_, _, err := writeReply(c.reply)
		if !errors.Is(err, lua.ErrReply) || !strings.Contains(err.Error(), "tenant_write.lua") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: writeReply(%v) error = %v, want lua.ErrReply naming tenant_write.lua and %q", c.name, c.reply, err, c.want)
		}
	}
}

// TestPageReply: {head, start, length, entry...}; any other shape is an
// error wrapping lua.ErrReply that names audit_page.lua.
func TestPageReply(t *testing.T) {
	t.Parallel()
	got, err := pageReply([]any{int64(5), int64(1), int64(7), "a", "b"})
	want := auditPageReply{head: 5, start: 1, length: 7, entries: []string{"a", "b"}}
	if err != nil || !cmp.Equal(want, got, cmp.AllowUnexported(auditPageReply{})) {
		t.Errorf("pageReply = %+v, %v; want %+v", got, err, want)
	}
	for _, c := range []struct {
		name  string
		reply any
		want  string
	}{
		{"not an array", "OK", "want an array"},
		{"short", []any{int64(5), int64(1)}, "2 elements, want 3"},
		{"string head", []any{"5", int64(1), int64(7)}, "element 1 is string"},
		{"integer entry", []any{int64(5), int64(1), int64(7), int64(3)}, "element 1 is int64"},
	} {
		_, err := pageReply(c.reply)
		if !errors.Is(err, lua.ErrReply) || !strings.Contains(err.Error(), "audit_page.lua") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: pageReply(%v) error = %v, want lua.ErrReply naming audit_page.lua and %q", c.name, c.reply, err, c.want)
		}
	}
}
