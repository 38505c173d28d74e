package testenv

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProc is a private redis-server for one test, on its own loopback port,
// without persistence (StartRedis; the servers of StartSentinel keep the
// append-only file and start again with their data). Its methods inject faults: Stop and Kill end it, Start
// brings it back on the same port (empty, as a restarted Redis without
// persistence is), Pause and Resume freeze it with SIGSTOP and SIGCONT so that
// clients see timeouts rather than refused connections.
//
// Call the methods from the test goroutine; they fail the test on error.
type RedisProc struct {
	t    testing.TB
	port int
	dir  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited

	// script, when set, is deploy/local/services.sh, which started this
	// server in dir (StartSentinel): Start, Stop, Kill, Pause and Resume go
	// through it and dir's pid file instead of cmd (sentinel.go).
	script string
}

// StartRedis starts a private redis-server and waits until it answers PING
// (a few milliseconds). Extra redis-server arguments, such as "--maxmemory",
// "1mb", are appended to the defaults. The server is killed when the test ends.
func StartRedis(t testing.TB, args ...string) *RedisProc {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("testenv: redis-server not found (%v); %s", err, hint)
	}
	r := &RedisProc{t: t, port: freePorts(t, 1)[0], dir: t.TempDir(), args: args}
	t.Cleanup(r.Kill)
	r.Start()
	return r
}

// Addr returns the server's host:port.
func (r *RedisProc) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
}

// Start starts the server on its port again after Stop or Kill, and waits until
// it answers PING. It does nothing while the server runs.
func (r *RedisProc) Start() {
	r.t.Helper()
	if r.script != "" {
		r.scriptStart()
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return
	}
	logFile := filepath.Join(r.dir, "redis.log")
	args := append([]string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(r.port), "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--logfile", logFile,
	}, r.args...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("testenv: start redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.cmd, r.done = cmd, done

	deadline := time.Now().Add(10 * time.Second)
	for !ping(r.Addr()) {
		select {
		case <-done:
			r.cmd = nil
			r.t.Fatalf("testenv: redis-server on %s exited at start:\n%s", r.Addr(), tail(logFile, 20))
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("testenv: redis-server on %s: no PONG after 10s:\n%s", r.Addr(), tail(logFile, 20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop shuts the server down with SIGTERM and waits until it has exited.
func (r *RedisProc) Stop() { r.end(syscall.SIGTERM) }

// Kill ends the server with SIGKILL and waits until it has exited.
func (r *RedisProc) Kill() { r.end(syscall.SIGKILL) }

// Pause freezes the server (SIGSTOP): connections stay open, nothing answers.
func (r *RedisProc) Pause() { r.signal(syscall.SIGSTOP) }

// Resume unfreezes a paused server (SIGCONT).
func (r *RedisProc) Resume() { r.signal(syscall.SIGCONT) }

func (r *RedisProc) signal(sig syscall.Signal) {
	r.t.Helper()
	if r.script != "" {
		r.scriptSignal(sig)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		r.t.Fatalf("testenv: redis on %s is not running", r.Addr())
	}
	if err := signalPid(r.cmd.Process.Pid, sig); err != nil {
		r.t.Fatalf("testenv: redis on %s: %v: %v", r.Addr(), sig, err)
	}
}

func (r *RedisProc) end(sig syscall.Signal) {
	r.t.Helper()
	if r.script != "" {
		r.scriptEnd(sig)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(sig)
	_ = r.cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot act on SIGTERM
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd = nil
}

// ping reports whether a Redis server at addr answers PING with PONG.
func ping(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// StartReplica starts a private Redis replicating primary (REPLICAOF at
// start) and returns once its link to the primary is up and the primary
// counts it online, so a WAIT on the primary counts it. Pause it (SIGSTOP) to make a replica that lags with
// its link still up.
func StartReplica(t testing.TB, primary *RedisProc) *RedisProc {
	t.Helper()
	_, port, _ := net.SplitHostPort(primary.Addr())
	replica := StartRedis(t, "--replicaof", "127.0.0.1", port)
	c := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer c.Close()
	pc := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	defer pc.Close()
	_, rport, _ := net.SplitHostPort(replica.Addr())
	// In sync on both sides: the replica's link is up, and the primary
	// counts it online (only an online replica acknowledges a WAIT; the
	// primary may mark it so a moment after the replica's link is up).
	WaitFor(t, 10*time.Second, "the replica "+replica.Addr()+" in sync", func() bool {
		info, err := c.Info(context.Background(), "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return false
		}
		pinfo, err := pc.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(pinfo, ",port="+rport+",state=online,")
	})
	return replica
}
