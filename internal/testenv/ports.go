package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/freeport"
)

// freePorts returns n distinct loopback TCP ports that were free a moment ago,
// below Linux's ephemeral ports (package freeport): a port of a private server
// that a test stopped is then not taken by an unrelated socket before the test
// starts it again.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := freeport.Loopback(n)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return ports
}

// FreeAddr returns a loopback host:port for a server another process will
// bind (package freeport).
func FreeAddr(t testing.TB) string {
	t.Helper()
	return freeport.Addr(freePorts(t, 1)[0])
}

// servicesScript returns the path of deploy/local/services.sh, found by walking
// up from the working directory (the package under test) to the module root.
func servicesScript(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "deploy", "local", "services.sh")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// tail returns the last n lines of the file at path, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := 0
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' && i != len(b)-1 {
			lines++
			if lines == n {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}
