package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestLoopback: the ports are distinct over calls, inside Low..High-1, and
// free when handed out; a port that is bound is skipped.
func TestLoopback(t *testing.T) {
	mu.Lock()
	taken := next
	mu.Unlock()
	held, err := net.Listen("tcp", Addr(taken))
	if err != nil {
		t.Skipf("port %d is in use by another process: %v", taken, err)
	}
	defer held.Close()
	seen := map[int]bool{}
	for range 20 {
		ports, err := Loopback(5)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if p < Low || p >= High {
				t.Fatalf("port %d outside %d..%d", p, Low, High-1)
			}
			if p == taken {
				t.Fatalf("port %d was handed out while bound", p)
			}
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			l, err := net.Listen("tcp", Addr(p))
			if err != nil {
				t.Fatalf("port %d is not free: %v", p, err)
			}
			l.Close()
		}
	}
	addr, err := LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	if p, _ := strconv.Atoi(port); host != "127.0.0.1" || p < Low || p >= High || seen[p] {
		t.Fatalf("LoopbackAddr = %s, want a port of 127.0.0.1 in %d..%d not handed out before", addr, Low, High-1)
	}
}
