//go:build chaos

package chaos

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binDir holds the ingest and drainer binaries, built once by TestMain.
var binDir string

// buildBinaries builds cmd/ingest and cmd/drainer into a new temporary
// directory and returns it.
func buildBinaries() (string, error) {
	dir, err := os.MkdirTemp("", "sluice-chaos")
	if err != nil {
		return "", err
	}
	for _, cmd := range []string{"ingest", "drainer"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), "../../cmd/"+cmd).CombinedOutput()
		if err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("build %s: %v\n%s", cmd, err, out)
		}
	}
	return dir, nil
}

// proc is one ingest or drainer process, started from the built binary
// with the row's config; its ops address (listen) answers /readyz. Its
// output goes to a log file, whose tail is logged when the test fails.
type proc struct {
	t      testing.TB
	name   string // "ingest", "drainer-0", ...
	bin    string
	config string
	listen string // host:port of /readyz
	env    []string
	log    string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func newProc(t testing.TB, name, bin, config, listen string, env ...string) *proc {
	p := &proc{t: t, name: name, bin: bin, config: config, listen: listen, env: env,
		log: filepath.Join(t.TempDir(), name+".log")}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", p.log, tail(p.log, 30))
		}
		p.stop(syscall.SIGKILL)
	})
	return p
}

// start runs the process and waits until its /readyz answers 200 (60 s).
func (p *proc) start() {
	p.t.Helper()
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.mu.Unlock()
		p.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, p.bin), "--config", p.config)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		p.mu.Unlock()
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	if err := waitReady("http://"+p.listen+"/readyz", done, 60*time.Second); err != nil {
		p.t.Fatalf("%s: %v\n%s", p.name, err, tail(p.log, 30))
	}
}

// kill ends the process with SIGKILL, term with SIGTERM (a clean shutdown);
// both wait until it has exited.
func (p *proc) kill() { p.stop(syscall.SIGKILL) }
func (p *proc) term() { p.stop(syscall.SIGTERM) }

func (p *proc) stop(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// waitReady polls url until it answers 200, the process exits (done) or
// timeout passes.
func waitReady(url string, done <-chan struct{}, timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	end := time.Now().Add(timeout)
	for {
		select {
		case <-done:
			return fmt.Errorf("exited before %s answered", url)
		default:
		}
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s: not ready after %v", url, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
