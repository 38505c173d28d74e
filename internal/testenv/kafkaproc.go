package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// KafkaProc is a private single-node Kafka (KRaft, broker and controller in one
// JVM) for one test, started by deploy/local/services.sh kafka-start in a
// temporary directory on free loopback ports, or one node of a
// StartKafkaCluster. Its methods inject faults: Stop (SIGTERM, clean
// shutdown), Kill (SIGKILL), Pause (SIGSTOP) and Resume (SIGCONT), and Start
// (restart on the same ports with the same data, as a real broker restart).
//
// Timing, measured on two cores busy with other builds (load 7-10):
// StartKafka 7-12 s (format once, JVM start, registration,
// __consumer_offsets), Start after Stop or Kill 6-13 s; ≈4 s on an idle
// machine. A restart after Kill includes waiting for the controller to fence
// the killed incarnation (the broker session is 4 s). The first StartKafka on a machine also fetches the
// jars (≈20 s) and builds the readiness probe, as services.sh up does. Call
// the methods from the test goroutine; they fail the test on error.
type KafkaProc struct {
	t           testing.TB
	script, dir string
	port, cport int
	// node, voters and clusterID are set for a node of a cluster
	// (kafka-start --node-id, --voters, --cluster-id).
	node              int
	voters, clusterID string
}

// StartKafka starts a private broker and returns once it answers a Metadata
// request listing itself. It is killed when the test ends; when the test has
// failed, the tail of the broker's log is logged first.
func StartKafka(t testing.TB) *KafkaProc {
	t.Helper()
	ports := freePorts(t, 2)
	k := &KafkaProc{t: t, script: servicesScript(t), dir: t.TempDir(), port: ports[0], cport: ports[1]}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: last lines of %s:\n%s", k.LogPath(), tail(k.LogPath(), 40))
		}
		k.run("kafka-stop", "--dir", k.dir, "--kill")
	})
	k.Start()
	return k
}

// Brokers returns the bootstrap address list, for kafka.ReaderConfig and such.
func (k *KafkaProc) Brokers() []string { return []string{k.Addr()} }

// Addr returns the broker's host:port.
func (k *KafkaProc) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.port)) }

// LogPath returns the file that holds the broker's log.
func (k *KafkaProc) LogPath() string { return filepath.Join(k.dir, "broker.log") }

// Start starts the broker (again) and waits until it is ready. It does nothing
// while the broker runs.
func (k *KafkaProc) Start() {
	k.t.Helper()
	start := time.Now()
	if err := k.start(); err != nil {
		k.t.Fatal(err)
	}
	k.t.Logf("testenv: kafka on %s ready after %v", k.Addr(), time.Since(start).Round(time.Millisecond))
}

// start is Start returning its error, for any goroutine.
func (k *KafkaProc) start() error {
	args := []string{"kafka-start", "--dir", k.dir, "--port", strconv.Itoa(k.port), "--controller-port", strconv.Itoa(k.cport)}
	if k.voters != "" {
		args = append(args, "--node-id", strconv.Itoa(k.node), "--voters", k.voters, "--cluster-id", k.clusterID)
	}
	return k.services(args...)
}

// Stop shuts the broker down cleanly (SIGTERM; SIGKILL after 30 s) and waits
// until it has exited.
func (k *KafkaProc) Stop() {
	k.t.Helper()
	k.run("kafka-stop", "--dir", k.dir)
}

// Kill ends the broker with SIGKILL and waits until it has exited.
func (k *KafkaProc) Kill() {
	k.t.Helper()
	k.run("kafka-stop", "--dir", k.dir, "--kill")
}

// Pause freezes the broker (SIGSTOP to the pid in <dir>/kafka.pid): its
// sockets stay open and what clients send waits in them, as with a hung
// host; Resume lets it go on.
func (k *KafkaProc) Pause() {
	k.t.Helper()
	k.signal(syscall.SIGSTOP)
}

// Resume unfreezes a paused broker (SIGCONT).
func (k *KafkaProc) Resume() {
	k.t.Helper()
	k.signal(syscall.SIGCONT)
}

func (k *KafkaProc) signal(sig syscall.Signal) {
	k.t.Helper()
	b, err := os.ReadFile(filepath.Join(k.dir, "kafka.pid"))
	if err != nil {
		k.t.Fatalf("testenv: kafka on %s: %v", k.Addr(), err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		k.t.Fatalf("testenv: kafka on %s: pid file: %v", k.Addr(), err)
	}
	if err := signalPid(pid, sig); err != nil {
		k.t.Fatalf("testenv: kafka on %s: %v: %v", k.Addr(), sig, err)
	}
}

func (k *KafkaProc) run(args ...string) {
	k.t.Helper()
	if err := k.services(args...); err != nil {
		k.t.Fatal(err)
	}
}

// services runs services.sh with args and returns an error holding its output
// when it fails.
func (k *KafkaProc) services(args ...string) error {
	cmd := exec.Command("bash", append([]string{k.script}, args...)...)
	cmd.Env = os.Environ()
	if os.Getenv("SLUICE_KAFKA_JVM_OPTS") == "" {
		// C1 only: a test broker starts sooner and never runs long enough to
		// profit from C2.
		cmd.Env = append(cmd.Env, "SLUICE_KAFKA_JVM_OPTS=-XX:TieredStopAtLevel=1")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testenv: services.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
