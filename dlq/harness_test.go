package dlq_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/backend"
	"github.com/sluicehq/sluice/queue/kafkaq"
	"github.com/sluicehq/sluice/tenants"
)

const (
	adminToken = "dlq-admin-token"
	apiKey     = "dlq-api-key"
)

// backends are the queue backends every end-to-end test runs on.
var backends = []string{backend.Redis, backend.Kafka}

// delivery is one request the sink received.
type delivery struct{ id, attempt, body string }

// sink is a target that rejects (422) the job ids in reject and accepts
// every other job.
type sink struct {
	mu     sync.Mutex
	reject map[string]bool
	got    []delivery
	srv    *httptest.Server
}

func newSink(t *testing.T) *sink {
	s := &sink{reject: map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		id := r.Header.Get("Sluice-Job-Id")
		s.mu.Lock()
		defer s.mu.Unlock()
		s.got = append(s.got, delivery{id: id, attempt: r.Header.Get("Sluice-Attempt"), body: string(b)})
		if s.reject[id] {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"error":"no such customer"}`)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// setReject sets whether the sink rejects job id.
func (s *sink) setReject(id string, reject bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reject[id] = reject
}

// deliveries returns the deliveries of job id so far.
func (s *sink) deliveries(id string) []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []delivery
	for _, d := range s.got {
		if d.id == id {
			out = append(out, d)
		}
	}
	return out
}

// stack is an ingest (with the admin API) and a drainer on one queue
// backend, a private Redis and a sink.
type stack struct {
	backend string
	tenant  string
	rdb     *redis.Client
	url     string
	sink    *sink
	reg     *prometheus.Registry
	prod    queue.Producer
}

// startStack runs the stack on backendName for one tenant.
func startStack(t *testing.T, backendName string) *stack {
	t.Helper()
	st := &stack{backend: backendName, tenant: testenv.Name(t, "dlq"), rdb: privateRedis(t), sink: newSink(t), reg: prometheus.NewRegistry()}
	cfg := st.config(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	bcfg := backend.Config{Backend: backendName, Redis: st.rdb, Tenants: []string{st.tenant}, Lease: 3 * time.Second,
		Kafka: kafkaq.Settings{Brokers: cfg.Kafka.Brokers, Topic: cfg.Kafka.Topic, DLQTopic: cfg.Kafka.DLQTopic,
			Partitions: 1, ReplicationFactor: 1, ConsumerGroup: testenv.Name(t, "group"), BatchTimeout: 2 * time.Millisecond},
		Logger: quiet()}
	prod, err := backend.NewProducer(ctx, bcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prod.Close() })
	st.prod = prod
	t.Logf("backend %s: producer %T", backendName, prod)
	st.url = startIngest(t, st.rdb, cfg, prod, st.reg)
	startDrainer(t, st.rdb, bcfg, cfg)
	return st
}

// config is the stack's configuration: one unlimited tenant delivering to
// the sink, an admin token.
func (st *stack) config(t *testing.T) *config.Config {
	t.Helper()
	y := "ingest:\n  admin_tokens: {alice: " + config.HashKey(adminToken) + "}\n" +
		"queue: {backend: " + st.backend + "}\n"
	if st.backend == backend.Kafka {
		topic := testenv.CreateTopic(t, testenv.KafkaBrokers(t), 1)
		y += "kafka: {brokers: [" + strings.Join(testenv.KafkaBrokers(t), ", ") + "], topic: " + topic + ", dlq_topic: " + topic + ".dlq}\n"
	}
	y += "drainer: {lease: 3s, max_attempts: 3, backoff_base: 1ms, backoff_max: 5ms}\n" +
		"tenants:\n  " + st.tenant + ":\n    api_keys: [\"" + config.HashKey(apiKey) + "\"]\n" +
		"    outflow: {unlimited: true}\n    target: {url: " + st.sink.srv.URL + ", timeout: 2s}\n"
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, y)
	}
	return cfg
}

// startIngest runs an ingest Server with a tenants Registry on rdb, as
// cmd/ingest wires them, and returns its URL.
func startIngest(t *testing.T, rdb *redis.Client, base *config.Config, prod queue.Producer, reg *prometheus.Registry) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tenants.NewRegistry(tenants.RegistryConfig{Redis: rdb, Base: base, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := ingest.New(ingest.Config{Settings: tr.Config(), Redis: rdb, Producer: prod, Admitter: adm,
		Tenants: tr, Registerer: reg, Gatherer: reg, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = tr.Run(ctx, srv.SetConfig) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done })
	return hs.URL
}

// startDrainer runs a drainer of cfg's tenants on the backend bcfg.
func startDrainer(t *testing.T, rdb *redis.Client, bcfg backend.Config, cfg *config.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, run, err := backend.NewConsumer(ctx, bcfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := drainer.New(drainer.Config{Consumer: cons, Redis: rdb, Tenants: cfg.Tenants, Settings: cfg.Drainer, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	cctx, stopConsumer := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = d.Run(rctx) }()
	go func() { defer wg.Done(); _ = run(cctx) }()
	t.Cleanup(func() { stop(); time.Sleep(10 * time.Millisecond); stopConsumer(); wg.Wait() })
}

// privateRedis starts a redis-server of the test's own: the registry reads
// every runtime tenant, so the tests do not share a keyspace.
func privateRedis(t *testing.T) *redis.Client {
	t.Helper()
	p := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// answer is an HTTP answer.
type answer struct {
	status int
	body   []byte
}

// json decodes the answer's body into a map.
func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d %s: %v", a.status, a.body, err)
	}
	return m
}

// do sends method path with token (the admin token or the API key) and a
// JSON body ("" for none).
func (st *stack) do(t *testing.T, method, path, token, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, st.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: b}
}

// admin sends an admin request on the tenant's dlq path (suffix after
// /admin/v1/tenants/{tenant}/dlq).
func (st *stack) admin(t *testing.T, method, suffix, body string) answer {
	t.Helper()
	return st.do(t, method, "/admin/v1/tenants/"+st.tenant+"/dlq"+suffix, adminToken, body)
}

// submit submits one job with id and payload, wanting 202.
func (st *stack) submit(t *testing.T, id, payload string) {
	t.Helper()
	if a := st.do(t, "POST", "/v1/jobs", apiKey, `{"type":"email","id":"`+id+`","payload":`+payload+`}`); a.status != http.StatusAccepted {
		t.Fatalf("submit %s: %d %s", id, a.status, a.body)
	}
}

// dlqCount is the tenant's stats dlq figure.
func (st *stack) dlqCount(t *testing.T) int {
	t.Helper()
	a := st.do(t, "GET", "/v1/tenants/"+st.tenant+"/stats", apiKey, "")
	if a.status != http.StatusOK {
		t.Fatalf("stats: %d %s", a.status, a.body)
	}
	n, _ := a.json(t)["dlq"].(float64)
	return int(n)
}
