package drainer_test

import (
	"strings"
	"sync"
	"testing"
)

// lockedLog is an io.Writer for a test's logger that may be written by
// several goroutines while the test reads it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// oneFailLine checks that the log has one delivery-failed line for tenant
// (its failures all fell within one 10-s window) and that it names the
// first failure: attempt 1, its error, nothing left out before it.
func (l *lockedLog) oneFailLine(t *testing.T, tenant string) {
	t.Helper()
	log := l.String()
	if n := strings.Count(log, `msg="drainer: delivery failed" tenant=`+tenant+" "); n != 1 {
		t.Errorf("%d delivery-failed lines for the tenant, want 1; log:\n%s", n, log)
	} else if !strings.Contains(log, " attempt=1 ") || !strings.Contains(log, " err=") || !strings.Contains(log, " suppressed=0 ") {
		t.Errorf("the delivery-failed line lacks attempt=1, err= or suppressed=0 (the first failure):\n%s", log)
	}
}
