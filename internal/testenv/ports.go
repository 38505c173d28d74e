package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// freePorts returns n distinct loopback TCP ports that were free a moment ago,
// drawn at random from 20000-31999. That range lies below Linux's ephemeral
// ports (32768-60999), which the kernel hands to every bind(":0") and outgoing
// connection of every process: a port of a private server that a test stopped
// is then not taken by an unrelated socket before the test starts it again.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("testenv: no free port in 20000-31999 after %d tries", tries)
		}
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		defer l.Close() // held until all n are chosen, so they differ
		ports = append(ports, port)
	}
	return ports
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
