package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// arrival is one job reaching the measuring point: the sink's handler, a Go
// Handler, or a BullMQ processor.
type arrival struct {
	at time.Time
	id string
	// sent is the delivery's Sluice-Sent-At: when the worker sent it (zero
	// when the header was missing or not RFC 3339).
	sent time.Time
}

// recorder keeps every arrival of the current row. Safe for concurrent use.
type recorder struct {
	mu  sync.Mutex
	arr []arrival
}

// add records job id, sent at sent, arriving at t.
func (r *recorder) add(id string, sent, t time.Time) {
	r.mu.Lock()
	r.arr = append(r.arr, arrival{at: t, id: id, sent: sent})
	r.mu.Unlock()
}

// count returns how many arrivals were recorded.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.arr)
}

// first returns the earliest arrival time recorded (zero when none).
func (r *recorder) first() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t time.Time
	for _, a := range r.arr {
		if t.IsZero() || a.at.Before(t) {
			t = a.at
		}
	}
	return t
}

// take returns the arrivals sorted by time and starts a new row.
func (r *recorder) take() []arrival {
	r.mu.Lock()
	out := r.arr
	r.arr = nil
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// waitCount waits until at least n arrivals are recorded, failing after
// timeout or when ctx is done or failed reports an error (a process died).
func (r *recorder) waitCount(ctx context.Context, n int, timeout time.Duration, failed func() error) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for r.count() < n {
		if err := failed(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs arrived within %s", r.count(), n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// sink is the measuring downstream: an HTTP server on a loopback port that
// answers every POST with 204 and records its arrival time and its
// Sluice-Job-Id and Sluice-Sent-At headers. The drainers' HTTP sink and BullMQ's processors post
// to it, so both systems are measured at the same point.
type sink struct {
	rec *recorder
	srv *http.Server
	url string
}

// startSink listens on a free loopback port and serves until close.
func startSink(rec *recorder) (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("drainbench: sink listen: %w", err)
	}
	s := &sink{rec: rec, url: "http://" + ln.Addr().String() + "/hook"}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Printf("drainbench: sink stopped: %v\n", err)
		}
	}()
	return s, nil
}

// ServeHTTP records a POST and answers 204.
func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	sent, _ := time.Parse(time.RFC3339Nano, r.Header.Get("Sluice-Sent-At")) // zero when missing
	s.rec.add(r.Header.Get("Sluice-Job-Id"), sent, now)
	w.WriteHeader(http.StatusNoContent)
}

func (s *sink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
