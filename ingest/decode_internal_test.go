package ingest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// TestDecodeProblemHidesConnectionErrors checks that a connection error that
// reached the decoder (which names both socket addresses) is answered 400
// without its text, and kept for the log.
func TestDecodeProblemHidesConnectionErrors(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("wrapped: %w", &net.OpError{Op: "read", Net: "tcp",
		Source: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 18080},
		Addr:   &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53062}, Err: os.ErrDeadlineExceeded})
	p := decodeProblem(err, "", 2048)
	if p.Status != 400 || strings.Contains(p.Detail, "127.0.0.1") || strings.Contains(p.Detail, "tcp") {
		t.Errorf("decodeProblem(%v) = %d %q, want a 400 naming no address", err, p.Status, p.Detail)
	}
	if !errors.Is(p.err, os.ErrDeadlineExceeded) {
		t.Errorf("problem keeps %v for the log, want the connection error", p.err)
	}
}
