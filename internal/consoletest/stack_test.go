package consoletest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/demosink"
	"github.com/sluicehq/sluice/internal/testenv"
)

// adminToken is the stack's admin token, typed into the login form.
const adminToken = "console-test-admin"

// binDir holds the ingest and drainer binaries built once by TestMain.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-consoletest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	for _, cmd := range []string{"ingest", "drainer"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), "../../cmd/"+cmd).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", cmd, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sink is the demo sink behind a test server. While rejecting is set it
// answers jobs whose id starts with "doomed-" 422, which the drainer
// dead-letters at once; it records the ids it accepted.
type sink struct {
	*demosink.Sink
	srv       *httptest.Server
	rejecting atomic.Bool
	mu        sync.Mutex
	accepted  map[string]bool
}

func newSink(t *testing.T) *sink {
	s := &sink{Sink: demosink.New(demosink.Config{}), accepted: map[string]bool{}}
	s.rejecting.Store(true)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(demosink.HeaderJobID)
		if r.Method == http.MethodPost && strings.HasPrefix(id, "doomed-") && s.rejecting.Load() {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Error(w, "this sink refuses doomed jobs for now", http.StatusUnprocessableEntity)
			return
		}
		s.Sink.ServeHTTP(w, r)
		if r.Method == http.MethodPost {
			s.mu.Lock()
			s.accepted[id] = true
			s.mu.Unlock()
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// received is how many jobs of tenant the sink accepted.
func (s *sink) received(tenant string) int64 { return s.Stats().Tenants[tenant].Received }

func (s *sink) got(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted[id]
}

// stack is ingest and one drainer on a private Redis, serving two tenants:
// busy (rate 5/s, under a steady load of 8 jobs/s) and spare (unlimited,
// for the dead job).
type stack struct {
	ingest      string // base URL
	busy, spare string
	sink        *sink
}

// startStack starts the stack on the queue backend ("redis" or "kafka":
// topics and a consumer group of the test's own on the shared Kafka).
func startStack(t *testing.T, backend string) *stack {
	st := &stack{busy: testenv.Name(t, "busy"), spare: testenv.Name(t, "spare"), sink: newSink(t)}
	// A Redis of the test's own: ingest's registry reads every runtime
	// tenant, and other tests create and delete theirs on the shared one.
	redisAddr := testenv.StartRedis(t).Addr()
	ingestAddr := testenv.FreeAddr(t)
	// A roomy Redis timeout: the shared servers are busy while tests run.
	y := fmt.Sprintf(`redis: {addr: %q, timeout: 2s}
queue: {backend: %s}
%s
ingest:
  listen: %q
  admin_tokens: {console: %q}
drainer:
  listen: %q
  lease: 5s
  max_attempts: 3
  backoff_base: 50ms
  backoff_max: 200ms
  shutdown_timeout: 2s
tenants:
  %s:
    api_keys: [%q]
    outflow: {rate: 5, capacity: 5}
    target: {url: %q, timeout: 5s}
  %s:
    api_keys: [%q]
    target: {url: %q, timeout: 5s}
`, redisAddr, backend, kafkaSection(t, backend), ingestAddr, config.HashKey(adminToken), testenv.FreeAddr(t),
		st.busy, config.HashKey("key-"+st.busy), st.sink.srv.URL+"/"+st.busy,
		st.spare, config.HashKey("key-"+st.spare), st.sink.srv.URL+"/"+st.spare)
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	st.ingest = "http://" + ingestAddr
	run(t, "ingest", path)
	run(t, "drainer", path)
	testenv.WaitFor(t, 60*time.Second, "ingest ready", func() bool {
		resp, err := http.Get(st.ingest + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return st
}

// kafkaSection is the config's kafka section for backend kafka (topics
// deleted when the test ends), "" for redis.
func kafkaSection(t *testing.T, backend string) string {
	if backend != "kafka" {
		return ""
	}
	brokers := testenv.KafkaBrokers(t)
	topic, dlq := testenv.Name(t, "jobs"), testenv.Name(t, "dlq")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
		_, _ = c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic, dlq}})
	})
	return fmt.Sprintf("kafka: {brokers: [%s], topic: %s, dlq_topic: %s, partitions: 2, consumer_group: %s}",
		strings.Join(brokers, ", "), topic, dlq, testenv.Name(t, "group"))
}

// run starts the binary cmd with the config at path; it is stopped
// (SIGTERM, then waited for) when the test ends. Its log goes to the test's
// log with -v.
func run(t *testing.T, cmd, path string) {
	c := exec.Command(filepath.Join(binDir, cmd), "--config", path)
	c.Stdout, c.Stderr = io.Discard, io.Discard
	if testing.Verbose() {
		c.Stderr = os.Stderr
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	})
}

// call sends one request to ingest with a bearer token ("" for none) and
// decodes a JSON answer into out (nil: ignored); it returns the status.
func (st *stack) call(t *testing.T, method, path, token string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, st.ingest+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// submit posts one job to tenant, with client id id ("" for none).
func (st *stack) submit(t *testing.T, tenant, id string) int {
	job := map[string]any{"type": "console-test", "payload": map[string]any{"n": 1}}
	if id != "" {
		job["id"] = id
	}
	return st.call(t, "POST", "/v1/jobs", "key-"+tenant, job, nil)
}

// load submits jobs/s jobs to tenant until the test ends.
func (st *stack) load(t *testing.T, tenant string, perSecond int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		job := []byte(`{"type":"console-test","payload":{"n":1}}`)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			req, _ := http.NewRequestWithContext(ctx, "POST", st.ingest+"/v1/jobs", bytes.NewReader(job))
			req.Header.Set("Authorization", "Bearer key-"+tenant)
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
}
