package testenv

import (
	"bytes"
	"sync"
)

// LogBuffer is a bytes.Buffer that a logger (slog.NewTextHandler(b, nil))
// and a test may share: the logger writes from its goroutines while the
// test reads String.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
