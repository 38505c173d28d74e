package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// binary is the drainer built once for the process tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-drainer-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "drainer")
	out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build drainer: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// countingSink is a real HTTP server counting deliveries per job id.
type countingSink struct {
	srv   *httptest.Server
	mu    sync.Mutex
	seen  map[string]int
	total int
	delay time.Duration
}

func newCountingSink(t *testing.T, delay time.Duration) *countingSink {
	s := &countingSink{seen: map[string]int{}, delay: delay}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(s.delay)
		s.mu.Lock()
		s.seen[r.Header.Get("Sluice-Job-Id")]++
		s.total++
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *countingSink) counts() (unique, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen), s.total
}

// writeConfig writes a drainer config for one tenant and returns its path.
func writeConfig(t *testing.T, tenant, sinkURL, extraOutflow string) string {
	y := fmt.Sprintf(`redis:
  addr: %s
drainer:
  listen: %s
  lease: 1s
  shutdown_timeout: 2s
  backoff_base: 10ms
  backoff_max: 100ms
tenants:
  %s:
    outflow: {%s}
    target: {url: %q, timeout: 5s}
`, testenv.RedisAddr(t), testenv.FreeAddr(t), tenant, extraOutflow, sinkURL)
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func start(t *testing.T, cfgPath string) *exec.Cmd {
	cmd := exec.Command(binary, "--config", cfgPath)
	// The race runtime sleeps 1s at exit by default; that is not the drainer's.
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

func pushN(t *testing.T, rdb *redis.Client, tenant string, n int) {
	ctx := context.Background()
	pipe := rdb.Pipeline()
	for i := 0; i < n; i++ {
		e := queue.Envelope{Version: queue.EnvelopeVersion, ID: fmt.Sprintf("j%05d", i), Tenant: tenant, Type: "t", Cost: 1, Payload: []byte(`{}`)}
		b, _ := e.Encode()
		pipe.RPush(ctx, keys.Queue(tenant), b)
	}
	pipe.IncrBy(ctx, keys.Backlog(tenant), int64(n))
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNothingLostWhenADrainerIsKilled runs two drainer processes on 2,000
// queued jobs, SIGKILLs one in the middle and starts it again. Every job
// must reach the sink; duplicates (jobs the killed drainer had sent but not
// acknowledged) are allowed and reported.
func TestNothingLostWhenADrainerIsKilled(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "kill")
	const n = 2000
	sink := newCountingSink(t, 2*time.Millisecond)
	pushN(t, rdb, tenant, n)
	a := start(t, writeConfig(t, tenant, sink.srv.URL, "rate: 1000, capacity: 50"))
	start(t, writeConfig(t, tenant, sink.srv.URL, "rate: 1000, capacity: 50"))

	testenv.WaitFor(t, 20*time.Second, "a third delivered", func() bool { u, _ := sink.counts(); return u >= n/3 })
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	held, _ := rdb.ZCard(ctx, keys.Processing(tenant)).Result()
	start(t, writeConfig(t, tenant, sink.srv.URL, "rate: 1000, capacity: 50"))

	testenv.WaitFor(t, 30*time.Second, "every job delivered and settled", func() bool {
		u, _ := sink.counts()
		b, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int()
		return u == n && b == 0
	})
	unique, total := sink.counts()
	t.Logf("SIGKILL under load: %d jobs, %d delivered unique, %d deliveries, %d duplicates; %d leases held at the kill", n, unique, total, total-unique, held)
	if q, _ := rdb.LLen(ctx, keys.Queue(tenant)).Result(); q != 0 {
		t.Errorf("queue length = %d, want 0", q)
	}
	if d, _ := rdb.ZCard(ctx, keys.JobIndex(tenant, "dead")).Result(); d != 0 {
		t.Errorf("dead letters = %d, want 0", d)
	}
}

// TestSIGTERMFinishesOrReturnsJobs sends SIGTERM while deliveries (1.5 s
// each) are in flight: the drainer must stop taking jobs, let the in-flight
// ones finish within shutdown_timeout (2 s), exit 0, and leave no lease.
func TestSIGTERMFinishesOrReturnsJobs(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "term")
	const n = 200
	sink := newCountingSink(t, 1500*time.Millisecond)
	pushN(t, rdb, tenant, n)
	cmd := start(t, writeConfig(t, tenant, sink.srv.URL, "concurrency: 5"))
	testenv.WaitFor(t, 10*time.Second, "5 jobs in flight", func() bool {
		c, _ := rdb.ZCard(ctx, keys.Inflight(tenant)).Result()
		return c == 5
	})
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := time.Since(t0)
	if err != nil {
		t.Errorf("exit: %v, want status 0", err)
	}
	if took > 3*time.Second {
		t.Errorf("exited %v after SIGTERM, want within shutdown_timeout 2s + 1s", took)
	}
	unique, total := sink.counts()
	q, _ := rdb.LLen(ctx, keys.Queue(tenant)).Result()
	leases, _ := rdb.ZCard(ctx, keys.Processing(tenant)).Result()
	backlog, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int()
	t.Logf("SIGTERM: exited in %v; %d delivered (%d deliveries), %d back in the queue, %d leases left, backlog %d", took, unique, total, q, leases, backlog)
	if leases != 0 {
		t.Errorf("leases after SIGTERM = %d, want 0", leases)
	}
	if int(q)+unique != n || backlog != int(q) {
		t.Errorf("queued %d + delivered %d = %d, backlog %d; want %d and backlog = queued", q, unique, int(q)+unique, backlog, n)
	}
}
