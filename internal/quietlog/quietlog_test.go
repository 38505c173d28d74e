package quietlog_test

import (
	"bytes"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/quietlog"
)

// TestOneLinePerKeyPerWindow: a key's first line is written, its others
// within the window only counted, and its next line after the window says
// how many were left out; another key has its own window.
func TestOneLinePerKeyPerWindow(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	l := quietlog.New(slog.New(slog.NewTextHandler(&buf, nil)), clock.Func(func() time.Time { return now }), 10*time.Second)
	l.Warn("a", "x failed", "n", 1)
	for i := range 4 {
		now = now.Add(time.Second)
		l.Warn("a", "x failed", "n", i+2)
	}
	l.Warn("b", "y failed")
	now = now.Add(10 * time.Second)
	l.Warn("a", "x failed", "n", 9)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`msg="x failed" n=1 suppressed=0 suppressed_window=10s`,
		`msg="y failed" suppressed=0 suppressed_window=10s`,
		`msg="x failed" n=9 suppressed=4 suppressed_window=10s`,
	}
	if len(lines) != len(want) {
		t.Fatalf("wrote %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d = %s\nwant it to end with %s", i+1, lines[i], w)
		}
	}
}

// TestForgetsQuietKeys: past Prune keys, a new key first drops those whose
// window has passed with nothing left out, and keeps those with a count
// still to report.
func TestForgetsQuietKeys(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	l := quietlog.New(slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Func(func() time.Time { return now }), time.Second)
	for i := range quietlog.Prune {
		l.Warn("t"+strconv.Itoa(i), "failed")
	}
	l.Warn("t0", "failed") // t0 has a count to report
	now = now.Add(time.Second)
	l.Warn("new", "failed")
	if n := l.Keys(); n != 2 {
		t.Errorf("remembered %d keys after the prune, want 2 (t0, with a count left out, and new)", n)
	}
}

// TestForgetsCountsAfterForgetWindows: a key with a count left out is kept
// for Forget windows (its next line reports it), then dropped at a prune,
// and a prune runs at most once a window however many keys come.
func TestForgetsCountsAfterForgetWindows(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	l := quietlog.New(slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Func(func() time.Time { return now }), time.Second)
	l.Warn("old", "failed")
	l.Warn("old", "failed") // a count left out
	for i := range quietlog.Prune {
		l.Warn("k"+strconv.Itoa(i), "failed")
		l.Warn("k"+strconv.Itoa(i), "failed")
	}
	now = now.Add(quietlog.Forget * time.Second)
	l.Warn("new", "failed")
	if n := l.Keys(); n != 1 {
		t.Errorf("remembered %d keys after Forget windows, want 1 (new)", n)
	}
}

// TestNilLogger: a Log made without a logger writes to slog.Default()
// instead of panicking on its first line (a server built without a Logger
// panicked serving its first request while Redis was down).
func TestNilLogger(t *testing.T) {
	q := quietlog.New(nil, nil, time.Second)
	q.Warn("k", "a warning from a Log without a logger")
}
