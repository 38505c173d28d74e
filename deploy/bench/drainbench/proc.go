package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/freeport"
)

// proc is a child process of the benchmark (a drainer or a BullMQ worker)
// with its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	addr string // a drainer's ops listener, "" for other processes
	done chan struct{}
	err  error // set when done is closed
}

// startProc starts argv with extra environment variables, its stdout and
// stderr appended to logPath.
func startProc(name, logPath string, env []string, argv ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("drainbench: %s log: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("drainbench: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited returns an error naming the process, its exit status and the tail
// of its log when it has ended, else nil.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v): %s", p.name, p.err, tail(p.log, 600))
	default:
		return nil
	}
}

// stop sends SIGTERM and waits up to timeout, then kills. It returns an
// error when the process had to be killed or exited non-zero.
func (p *proc) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.status()
	default:
	}
	p.saveMetrics()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.status()
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, timeout)
	}
}

// saveMetrics writes a drainer's /metrics, read just before it is stopped,
// next to its log (<log>.metrics), so a row's retries, lost leases, reaps and
// errors can be read after the run (a duplicate arrival is explained by
// them or not). A drainer that does not answer within a second leaves no
// file; the run goes on.
func (p *proc) saveMetrics() {
	if p.addr == "" {
		return
	}
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return
	}
	_ = os.WriteFile(p.log+".metrics", b, 0o644)
}

func (p *proc) status() error {
	if p.err != nil {
		return fmt.Errorf("%s: %w: %s", p.name, p.err, tail(p.log, 600))
	}
	return nil
}

// exitCode is the process's exit code once done, else -1.
func (p *proc) exitCode() int {
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			return ee.ExitCode()
		}
		if p.err == nil {
			return 0
		}
	default:
	}
	return -1
}

// fleet is several processes started and stopped together.
type fleet []*proc

// failed returns the first process's exit error, if any has exited.
func (f fleet) failed() error {
	for _, p := range f {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// stop stops every process (in parallel) and joins their errors.
func (f fleet) stop(timeout time.Duration) error {
	errs := make(chan error, len(f))
	for _, p := range f {
		go func() { errs <- p.stop(timeout) }()
	}
	var all []error
	for range f {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// tail returns the last n bytes of a file on one line.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// waitUntil waits until t, failing early when failed reports an error.
func waitUntil(t time.Time, failed func() error) error {
	for time.Now().Before(t) {
		if err := failed(); err != nil {
			return err
		}
		time.Sleep(min(time.Until(t), 50*time.Millisecond))
	}
	return failed()
}

// startRedis starts a private redis-server (no persistence) on a free
// loopback port, its log in dir, and waits until it answers.
func startRedis(ctx context.Context, dir string) (*proc, string, error) {
	addr, err := freeport.LoopbackAddr()
	if err != nil {
		return nil, "", err
	}
	_, port, _ := strings.Cut(addr, ":")
	p, err := startProc("redis-server", filepath.Join(dir, "redis.log"), nil,
		"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return nil, "", fmt.Errorf("%w (install redis-server or set BENCH_REDIS)", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return p, addr, nil
		}
		if e := p.exited(); e != nil || time.Now().After(deadline) {
			p.stop(time.Second)
			return nil, "", fmt.Errorf("drainbench: private redis-server on %s did not start: %v %v", addr, err, e)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
