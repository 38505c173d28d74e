// Package freeport hands out loopback TCP ports for servers that another
// process will bind: a private redis-server or Kafka broker of a test, a
// drainer's ops server in a benchmark.
//
// A port the kernel picked (bind to 127.0.0.1:0) and that was closed again
// can be taken by any outgoing connection of any process before the child
// binds it: Linux hands out its ephemeral ports (32768–60999 by default) to
// both. The child then fails with "address already in use", as a drainer
// did in a benchmark run (2026-12-07). The ports here come from 20000–31999,
// which the kernel never picks, so only an explicit bind can race for them.
// A process walks the range from a random start, so it hands out a port again
// only after the other 11,999 (a port handed out a moment ago may not be bound
// yet), and test binaries running side by side seldom try the same ports.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Low and High bound the ports handed out: Low ≤ port < High.
const Low, High = 20000, 32000

var (
	mu   sync.Mutex
	next = Low + rand.IntN(High-Low) // the next port to try
)

// Loopback returns n distinct ports of 127.0.0.1, each free a moment ago: the
// next n of the range, from where the last call stopped, that bind.
func Loopback(n int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == High-Low {
			return nil, fmt.Errorf("freeport: found %d of %d free ports in 127.0.0.1:%d–%d", len(ports), n, Low, High-1)
		}
		port := next
		next = Low + (next+1-Low)%(High-Low)
		l, err := net.Listen("tcp", Addr(port))
		if err != nil {
			continue
		}
		defer l.Close() // held until all n are chosen, so they differ
		ports = append(ports, port)
	}
	return ports, nil
}

// LoopbackAddr returns "127.0.0.1:port" of one port as Loopback hands out.
func LoopbackAddr() (string, error) {
	p, err := Loopback(1)
	if err != nil {
		return "", err
	}
	return Addr(p[0]), nil
}

// Addr is "127.0.0.1:port".
func Addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
