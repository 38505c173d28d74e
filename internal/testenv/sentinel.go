package testenv

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisHA is a private replicated Redis for one test: a primary, one
// replica of it (both with the append-only file, appendfsync everysec) and
// three Sentinels monitoring them (quorum 2, down-after-milliseconds 1000,
// failover-timeout 3 s), started by deploy/local/services.sh sentinel-start
// in a temporary directory on free loopback ports. KillPrimary and
// WaitFailover inject and await a failover; Primary and Replica are the two
// servers as they were at start (their roles swap after a failover).
//
// Timing on a busy 2-core machine: StartSentinel ≈5 s (the Sentinels learn
// of each other through their hello messages, every 2 s); after
// KillPrimary the replica is promoted in ≈2-3 s (1 s down-after, the vote,
// the promotion). Call the methods from the test goroutine; they fail the
// test on error.
type RedisHA struct {
	t         testing.TB
	script    string
	dir       string
	primary   *RedisProc
	replica   *RedisProc
	sentinels []int
	killed    string // the primary's address at the last KillPrimary
}

// SentinelMaster is the master name the Sentinels of StartSentinel monitor.
const SentinelMaster = "sluice"

// StartSentinel starts a primary, its replica and three Sentinels, and
// returns once every Sentinel names the primary as master, knows the
// replica and the other Sentinels, and the replica is in sync. All of them
// are killed when the test ends; when the test has failed, the tails of
// their logs are logged first.
func StartSentinel(t testing.TB) *RedisHA {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("testenv: redis-server not found (%v); %s", err, hint)
	}
	ports := freePorts(t, 5)
	h := &RedisHA{t: t, script: servicesScript(t), dir: t.TempDir(), sentinels: ports[2:]}
	h.primary = &RedisProc{t: t, port: ports[0], dir: filepath.Join(h.dir, "primary"), script: h.script}
	h.replica = &RedisProc{t: t, port: ports[1], dir: filepath.Join(h.dir, "replica"), script: h.script}
	t.Cleanup(func() {
		if t.Failed() {
			h.logTails()
		}
		h.run("sentinel-stop", "--dir", h.dir, "--kill")
	})
	start := time.Now()
	h.run("sentinel-start", "--dir", h.dir, "--primary-port", strconv.Itoa(ports[0]),
		"--replica-port", strconv.Itoa(ports[1]), "--sentinel-ports", joinPorts(h.sentinels))
	t.Logf("testenv: redis sentinel %s ready after %v (primary %s, replica %s, sentinels %v)",
		SentinelMaster, time.Since(start).Round(time.Millisecond), h.primary.Addr(), h.replica.Addr(), h.SentinelAddrs())
	return h
}

// MasterName returns the master name the Sentinels monitor.
func (h *RedisHA) MasterName() string { return SentinelMaster }

// SentinelAddrs returns the three Sentinels' host:port.
func (h *RedisHA) SentinelAddrs() []string {
	addrs := make([]string, len(h.sentinels))
	for i, p := range h.sentinels {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs
}

// Primary returns the server that was the primary at start.
func (h *RedisHA) Primary() *RedisProc { return h.primary }

// Replica returns the server that was the replica at start.
func (h *RedisHA) Replica() *RedisProc { return h.replica }

// PrimaryAddr returns the master's address as the first Sentinel that
// answers names it.
func (h *RedisHA) PrimaryAddr() string {
	h.t.Helper()
	for _, addr := range h.SentinelAddrs() {
		if m, err := sentinelMaster(addr); err == nil {
			return m
		}
	}
	h.t.Fatalf("testenv: no Sentinel of %v names a master", h.SentinelAddrs())
	return ""
}

// KillPrimary ends the current primary (as PrimaryAddr names it) with
// SIGKILL and waits until it has exited.
func (h *RedisHA) KillPrimary() {
	h.t.Helper()
	addr := h.PrimaryAddr()
	h.killed = addr
	h.server(addr).Kill()
	h.t.Logf("testenv: killed the primary %s", addr)
}

// WaitFailover waits until every Sentinel names a master other than the one
// KillPrimary killed and that server answers as a master, and returns its
// address; it fails the test after timeout.
func (h *RedisHA) WaitFailover(timeout time.Duration) string {
	h.t.Helper()
	start := time.Now()
	var promoted string
	WaitFor(h.t, timeout, "a Sentinel failover of "+h.killed, func() bool {
		promoted = ""
		for _, addr := range h.SentinelAddrs() {
			m, err := sentinelMaster(addr)
			if err != nil || m == h.killed || (promoted != "" && m != promoted) || !failoverDone(addr) {
				return false
			}
			promoted = m
		}
		return isMaster(promoted)
	})
	h.t.Logf("testenv: %s promoted %v after the kill", promoted, time.Since(start).Round(time.Millisecond))
	return promoted
}

// Rejoin starts the server KillPrimary killed again, with its data, and
// makes it a replica of the current primary at once (REPLICAOF: the
// Sentinels would send it themselves, but only ≈10 s later), then waits
// until its replication link is up. After it the setup has a replica
// again, which an enqueue with redis.wait_replicas 1 needs.
func (h *RedisHA) Rejoin() {
	h.t.Helper()
	r := h.server(h.killed)
	r.Start()
	host, port, _ := net.SplitHostPort(h.PrimaryAddr())
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		h.t.Fatalf("testenv: REPLICAOF %s %s on %s: %v", host, port, r.Addr(), err)
	}
	WaitFor(h.t, 20*time.Second, r.Addr()+" in sync as a replica", func() bool {
		info, err := c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
}

// server returns the server listening on addr.
func (h *RedisHA) server(addr string) *RedisProc {
	h.t.Helper()
	for _, r := range []*RedisProc{h.primary, h.replica} {
		if r.Addr() == addr {
			return r
		}
	}
	h.t.Fatalf("testenv: %s is neither server of the sentinel setup", addr)
	return nil
}

func (h *RedisHA) logTails() {
	logs := []string{filepath.Join(h.dir, "primary", "redis.log"), filepath.Join(h.dir, "replica", "redis.log")}
	for _, p := range h.sentinels {
		logs = append(logs, filepath.Join(h.dir, "sentinel-"+strconv.Itoa(p), "sentinel.log"))
	}
	for _, l := range logs {
		h.t.Logf("testenv: last lines of %s:\n%s", l, tail(l, 20))
	}
}

func (h *RedisHA) run(args ...string) { runScript(h.t, h.script, args...) }

// runScript runs services.sh with args and fails t with its output on error.
func runScript(t testing.TB, script string, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: services.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// sentinelMaster asks the Sentinel at addr for the master's address.
func sentinelMaster(addr string) (string, error) {
	s := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	hp, err := s.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// failoverDone reports whether the Sentinel at addr has no failover of
// SentinelMaster in progress (SENTINEL MASTER's flags): a server restarted
// while one still runs can be taken back as the master (CI saw the promoted
// replica made a replica of the restarted old primary).
func failoverDone(addr string) bool {
	s := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m, err := s.Master(ctx, SentinelMaster).Result()
	return err == nil && !strings.Contains(m["flags"], "failover")
}

// isMaster reports whether the server at addr answers ROLE as a master.
func isMaster(addr string) bool {
	role := roleOf(addr)
	return len(role) > 0 && role[0] == "master"
}

// replicaOf returns the primary the server at addr replicates ("host:port"
// from ROLE), or "" when it is no replica or does not answer.
func replicaOf(addr string) string {
	role := roleOf(addr)
	if len(role) < 3 || role[0] != "slave" {
		return ""
	}
	host, _ := role[1].(string)
	port, _ := role[2].(int64)
	return net.JoinHostPort(host, strconv.FormatInt(port, 10))
}

// roleOf returns the server at addr's answer to ROLE (nil when it does not
// answer within 2 s).
func roleOf(addr string) []any {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return nil
	}
	return role
}

func joinPorts(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// scriptStart starts a StartSentinel server again after Stop or Kill, with
// its data (services.sh redis-start); the Sentinels make it a replica of
// the current master. It does nothing while the server runs.
func (r *RedisProc) scriptStart() {
	r.t.Helper()
	runScript(r.t, r.script, "redis-start", "--dir", r.dir, "--port", strconv.Itoa(r.port))
}

// scriptEnd ends a StartSentinel server: SIGKILL, or SIGTERM (services.sh
// redis-stop), and waits until it has exited.
func (r *RedisProc) scriptEnd(sig syscall.Signal) {
	r.t.Helper()
	_ = r.pidSignal(syscall.SIGCONT) // a paused server cannot act on SIGTERM
	args := []string{"redis-stop", "--dir", r.dir}
	if sig == syscall.SIGKILL {
		args = append(args, "--kill")
	}
	runScript(r.t, r.script, args...)
}

// scriptSignal sends sig to a StartSentinel server (Pause, Resume).
func (r *RedisProc) scriptSignal(sig syscall.Signal) {
	r.t.Helper()
	if err := r.pidSignal(sig); err != nil {
		r.t.Fatalf("testenv: redis on %s: %v: %v", r.Addr(), sig, err)
	}
}

func (r *RedisProc) pidSignal(sig syscall.Signal) error {
	b, err := os.ReadFile(filepath.Join(r.dir, "redis.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	return signalPid(pid, sig)
}
