package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"
)

// profileSeconds is how long a CPU profile of a throughput row lasts: the
// row's expected drain time at a conservative 2,000 jobs/s, 1 to 60 s. A
// profile longer than the drain only adds idle time, which a CPU profile
// does not sample.
func profileSeconds(jobs int) int { return min(60, max(1, jobs/2000+1)) }

// startProfile fetches a CPU profile of the drainer whose ops listener is
// addr (drainer.pprof on) into dir/name.cpu.pprof, in the background. The
// returned wait blocks until the profile is saved and returns its path, or
// the error; the caller waits before stopping the process.
func startProfile(ctx context.Context, addr, dir, name string, seconds int) (wait func() (string, error)) {
	done := make(chan error, 1)
	path := filepath.Join(dir, name+".cpu.pprof")
	go func() { done <- fetchProfile(ctx, addr, fmt.Sprintf("profile?seconds=%d", seconds), path) }()
	return func() (string, error) { return path, <-done }
}

// profileHarness starts a CPU profile of the harness's own process into
// BENCH_PROFILE/name.cpu.pprof: a Go Handler row's drainers run embedded
// in it, so this is their profile (with the harness's arrival counting).
// The returned stop ends it and says where it went, or why it did not
// start; without BENCH_PROFILE both do nothing.
func (b *bench) profileHarness(name string) (stop func() (note string)) {
	if b.o.profileDir == "" {
		return func() string { return "" }
	}
	path := filepath.Join(b.o.profileDir, name+".cpu.pprof")
	f, err := createProfile(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		return func() string { return "profile: " + err.Error() }
	}
	return func() string {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return "profile: " + err.Error()
		}
		return "CPU profile of the harness (the embedded drainers): " + path
	}
}

// createProfile creates path, and its directory.
func createProfile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("drainbench: profile dir: %w", err)
	}
	return os.Create(path)
}

// saveHeapProfile saves the drainer's live heap (a GC runs first) into
// dir/name.heap.pprof and returns its path.
func saveHeapProfile(ctx context.Context, addr, dir, name string) (string, error) {
	path := filepath.Join(dir, name+".heap.pprof")
	return path, fetchProfile(ctx, addr, "heap?gc=1", path)
}

// fetchProfile saves the ops listener's /debug/pprof/<profile> into path.
func fetchProfile(ctx context.Context, addr, profile, path string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/%s", addr, profile)
	var resp *http.Response
	var err error
	// The ops listener comes up a moment after the process starts.
	for deadline := time.Now().Add(10 * time.Second); ; {
		req, rerr := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if rerr != nil {
			return fmt.Errorf("drainbench: profile request: %w", rerr)
		}
		resp, err = http.DefaultClient.Do(req)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("drainbench: profile %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("drainbench: profile %s: %s", url, resp.Status)
	}
	f, err := createProfile(path)
	if err != nil {
		return fmt.Errorf("drainbench: profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("drainbench: profile %s: %w", path, err)
	}
	return f.Close()
}
