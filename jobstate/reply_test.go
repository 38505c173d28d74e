package jobstate

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/lua"
)

// wantReplyError fails unless err wraps lua.ErrReply, names script and
// contains want.
func wantReplyError(t *testing.T, what string, err error, script, want string) {
	t.Helper()
	if !errors.Is(err, lua.ErrReply) || !strings.Contains(err.Error(), script) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: error = %v, want lua.ErrReply naming %s and %q", what, err, script, want)
	}
}

// TestStartReply: n >= 1 delivers as attempt n, 0 drops (cancelled), -1
// drops a duplicate; anything else is an error and delivers, so an
// unexpected reply never drops a job.
func TestStartReply(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		reply any
		want  Start
	}{
		{int64(1), Start{Deliver: true, Attempt: 1}},
		{int64(2), Start{Deliver: true, Attempt: 2}},
		{int64(0), Start{}},
		{int64(-1), Start{Duplicate: true}},
	} {
		if got, err := ReadStart(c.reply); err != nil || got != c.want {
			t.Errorf("ReadStart(%v) = %+v, %v; want %+v, nil", c.reply, got, err, c.want)
		}
		if deliver, err := StartReply(c.reply); err != nil || deliver != c.want.Deliver {
			t.Errorf("StartReply(%v) = %v, %v; want %v, nil", c.reply, deliver, err, c.want.Deliver)
		}
	}
	for _, c := range []struct {
		name  string
		reply any
		want  string
	}{
		{"minus two", int64(-2), "-2, want an attempt >= 1, 0 or -1"},
		{"string", "0", "is string"},
		{"nil", nil, "is <nil>"},
		{"array", []any{int64(0)}, "is []interface {}"},
	} {
		deliver, err := StartReply(c.reply)
		if !deliver {
			t.Errorf("%s: StartReply(%v) drops the job; an unexpected reply must deliver", c.name, c.reply)
		}
		wantReplyError(t, c.name, err, "job_state_dispatch.lua", c.want)
	}
}

// TestEnqueueReply: the last seq, >= 1; anything else is an error.
func TestEnqueueReply(t *testing.T) {
	t.Parallel()
	if n, err := EnqueueReply(int64(7), 1); err != nil || n != 7 {
		t.Errorf("EnqueueReply(7) = %d, %v; want 7, nil", n, err)
	}
	for _, c := range []struct {
		name  string
		reply any
		want  string
	}{
		{"zero", int64(0), "seq 0"},
		{"string", "7", "is string"},
		{"nil", nil, "is <nil>"},
	} {
		_, err := EnqueueReply(c.reply, 1)
		wantReplyError(t, c.name, err, "job_state_enqueue.lua", c.want)
	}
}

// TestSettleReply: 1; anything else is an error.
func TestSettleReply(t *testing.T) {
	t.Parallel()
	if err := SettleReply(int64(1)); err != nil {
		t.Errorf("SettleReply(1) = %v, want nil", err)
	}
	for _, c := range []struct {
		name  string
		reply any
		want  string
	}{
		{"zero", int64(0), "0, want 1"},
		{"string", "1", "is string"},
		{"array", []any{}, "is []interface {}"},
	} {
		wantReplyError(t, c.name, SettleReply(c.reply), "job_state_settle.lua", c.want)
	}
}

// TestCancelReply: {1, _} cancels, {0, state} conflicts, {-1, ""} is not
// found; any other shape is an error naming the script, never a cancel.
func TestCancelReply(t *testing.T) {
	t.Parallel()
	if err := cancelReply("acme", "j", []any{int64(1), "queued"}); err != nil {
		t.Errorf("cancelReply({1, queued}) = %v, want nil", err)
	}
	var conflict *ConflictError
	if err := cancelReply("acme", "j", []any{int64(0), "done"}); !errors.As(err, &conflict) || conflict.State != "done" {
		t.Errorf("cancelReply({0, done}) = %v, want a ConflictError naming done", err)
	}
	if err := cancelReply("acme", "j", []any{int64(-1), ""}); !errors.Is(err, ErrNotFound) {
		t.Errorf("cancelReply({-1, \"\"}) = %v, want ErrNotFound", err)
	}
	for _, c := range []struct {
		name  string
		reply any
		want  string
	}{
		{"not an array", int64(1), "want an array"},
		{"short", []any{int64(1)}, "1 elements, want 2"},
		{"long", []any{int64(1), "queued", "x"}, "3 elements, want 2"},
		{"string code", []any{"1", "queued"}, "code is string"},
		{"integer state", []any{int64(0), int64(3)}, "state is int64"},
		{"unknown code", []any{int64(2), "queued"}, "code 2"},
	} {
		wantReplyError(t, c.name, cancelReply("acme", "j", c.reply), "job_state_cancel.lua", c.want)
	}
}
