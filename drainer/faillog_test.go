package drainer

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// TestFailLogOneLinePerTenantPerWindow: the first failure of a tenant is
// logged with its job, attempt, outcome and error; further failures of that
// tenant within failLogEvery are only counted, and the next line after the
// window says how many were left out. Another tenant has its own window.
func TestFailLogOneLinePerTenantPerWindow(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	f := newFailLog(slog.New(slog.NewTextHandler(&buf, nil)), clock.Func(func() time.Time { return now }))
	boom := errors.New(`drainer: post job j1: Post "http://t.example/hook": connection refused`)

	f.failed("a", "j1", 1, "retry", boom)
	for i := range 5 {
		now = now.Add(time.Second)
		f.failed("a", "j"+string(rune('2'+i)), 1, "retry", boom)
	}
	f.failed("b", "k1", 3, "dead", errors.New("404 Not Found"))
	now = now.Add(failLogEvery)
	f.failed("a", "j9", 2, "retry_after", boom)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("logged %d lines, want 3 (a's first, b's first, a's after the window):\n%s", len(lines), buf.String())
	}
	for i, want := range []string{
		`level=WARN msg="drainer: delivery failed" tenant=a job_id=j1 attempt=1 outcome=retry err="drainer: post job j1: Post \"http://t.example/hook\": connection refused" suppressed=0`,
		`tenant=b job_id=k1 attempt=3 outcome=dead err="404 Not Found" suppressed=0`,
		`tenant=a job_id=j9 attempt=2 outcome=retry_after`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s\nwant it to contain %s", i+1, lines[i], want)
		}
	}
	if !strings.Contains(lines[2], "suppressed=5 suppressed_window=10s") {
		t.Errorf("line 3 = %s\nwant suppressed=5 suppressed_window=10s", lines[2])
	}
}
