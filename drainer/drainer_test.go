package drainer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// push queues jobs the way the Redis producer does: RPUSH + backlog INCRBY.
func push(t testing.TB, rdb redis.UniversalClient, jobs ...queue.Envelope) {
	t.Helper()
	ctx := context.Background()
	for _, e := range jobs {
		if e.Version == 0 {
			e.Version = queue.EnvelopeVersion
		}
		if e.Cost == 0 {
			e.Cost = 1
		}
		b, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.RPush(ctx, keys.Queue(e.Tenant), b).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.IncrBy(ctx, keys.Backlog(e.Tenant), e.Cost).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func jobs(tenant string, n int) []queue.Envelope {
	out := make([]queue.Envelope, n)
	for i := range out {
		out[i] = queue.Envelope{ID: fmt.Sprintf("%s-%d", tenant, i), Tenant: tenant, Type: "mail", Payload: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
	}
	return out
}

// delivery is one request the test sink saw.
type delivery struct {
	at      time.Time
	id      string
	tenant  string
	attempt string
	sentAt  string // Sluice-Sent-At
}

// sink is a real HTTP server recording deliveries; answer decides the reply.
type sink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []delivery
	answer func(d delivery, n int) (status int, retryAfter string)
	seen   map[string]int
}

func newSink(t testing.TB, answer func(d delivery, n int) (int, string)) *sink {
	s := &sink{answer: answer, seen: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		d := delivery{at: time.Now(), id: r.Header.Get("Sluice-Job-Id"), tenant: r.Header.Get("Sluice-Tenant"), attempt: r.Header.Get("Sluice-Attempt"), sentAt: r.Header.Get("Sluice-Sent-At")}
		s.mu.Lock()
		s.seen[d.id]++
		n := s.seen[d.id]
		s.got = append(s.got, d)
		s.mu.Unlock()
		st, ra := 200, ""
		if s.answer != nil {
			st, ra = s.answer(d, n)
		}
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(st)
		fmt.Fprintf(w, "status %d", st)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) deliveries() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.got...)
}

func (s *sink) count(tenant string) int {
	n := 0
	for _, d := range s.deliveries() {
		if d.tenant == tenant {
			n++
		}
	}
	return n
}

// run starts a drainer and returns a stop func that cancels it and waits.
func run(t testing.TB, cfg drainer.Config) (stop func() error) {
	t.Helper()
	if cfg.Consumer == nil {
		cfg.Consumer = mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: cfg.Redis, Lease: cfg.Settings.Lease, Poll: 10 * time.Millisecond}))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d, err := drainer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var rerr error
	stop = func() error {
		once.Do(func() { cancel(); rerr = <-done })
		return rerr
	}
	t.Cleanup(func() { stop() })
	return stop
}

func tenantCfg(url string, o config.Outflow) config.Tenant {
	return config.Tenant{Outflow: o, Target: config.Target{URL: url, Timeout: 2 * time.Second}}
}

func settings() config.Drainer {
	return config.Drainer{Lease: 3 * time.Second, MaxAttempts: 3, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, ShutdownTimeout: 2 * time.Second}
}

func TestDrainerDeliversEveryJobWithHeaders(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "dr")
	s := newSink(t, nil)
	push(t, rdb, jobs(tenant, 20)...)
	start := time.Now()
	run(t, drainer.Config{Redis: rdb, Settings: settings(), Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{})}})
	testenv.WaitFor(t, 5*time.Second, "20 deliveries", func() bool { return s.count(tenant) >= 20 })
	testenv.WaitFor(t, 2*time.Second, "backlog 0", func() bool { n, _ := rdb.Get(context.Background(), keys.Backlog(tenant)).Int(); return n == 0 })
	var ids []string
	for _, d := range s.deliveries() {
		if d.attempt != "1" || d.tenant != tenant {
			t.Errorf("delivery %+v: want Sluice-Attempt 1 and Sluice-Tenant %s", d, tenant)
		}
		// Sluice-Sent-At: RFC 3339 in UTC, after the drainer started and
		// not after the sink received it (the same host's clock).
		sent, err := time.Parse(time.RFC3339Nano, d.sentAt)
		if err != nil || sent.Location() != time.UTC || sent.Before(start) || sent.After(d.at) {
			t.Errorf("delivery %s: Sluice-Sent-At %q (%v), want a UTC time in [%v, %v]", d.id, d.sentAt, err, start, d.at)
		}
		ids = append(ids, d.id)
	}
	sort.Strings(ids)
	var want []string
	for _, j := range jobs(tenant, 20) {
		want = append(want, j.ID)
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("delivered ids (-want +got):\n%s", diff)
	}
}

func TestDrainerRetriesAndDeadLetters(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "dr")
	s := newSink(t, func(d delivery, n int) (int, string) {
		switch d.id {
		case tenant + "-busy": // asks twice for a pause, then succeeds
			if n <= 2 {
				return 503, "0"
			}
		case tenant + "-flaky": // fails once, then succeeds
			if n == 1 {
				return 500, ""
			}
		case tenant + "-broken": // always 500: attempts run out
			return 500, ""
		case tenant + "-bad": // 4xx: dead at once
			return 422, ""
		}
		return 200, ""
	})
	var js []queue.Envelope
	for _, id := range []string{"busy", "flaky", "broken", "bad", "fine"} {
		js = append(js, queue.Envelope{ID: tenant + "-" + id, Tenant: tenant, Type: "t"})
	}
	push(t, rdb, js...)
	reg := prometheus.NewRegistry()
	off := false
	logs := &testenv.LogBuffer{}
	stop := run(t, drainer.Config{Redis: rdb, Settings: settings(), Registerer: reg,
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
		Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Adaptive: &off})}})
	testenv.WaitFor(t, 10*time.Second, "all jobs settled", func() bool {
		n, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int()
		return n == 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	oneFailLine(t, logs, tenant)
	attempts := map[string][]string{}
	for _, d := range s.deliveries() {
		attempts[d.id[len(tenant)+1:]] = append(attempts[d.id[len(tenant)+1:]], d.attempt)
	}
	want := map[string][]string{
		"busy":   {"1", "2", "3"}, // Retry-After spends no attempt of MaxAttempts, but every start counts
		"flaky":  {"1", "2"},
		"broken": {"1", "2", "3"}, // MaxAttempts 3
		"bad":    {"1"},
		"fine":   {"1"},
	}
	if diff := cmp.Diff(want, attempts); diff != "" {
		t.Errorf("Sluice-Attempt per job (-want +got):\n%s", diff)
	}
	recs, err := dlq.Letters(ctx, rdb, tenant)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, dl := range recs {
		env, err := queue.Decode(dl.Job)
		if err != nil {
			t.Fatal(err)
		}
		got[env.ID[len(tenant)+1:]] = fmt.Sprintf("%s status=%d attempts=%d body=%q", dl.Reason, dl.Status, dl.Attempts, dl.Response)
	}
	wantDLQ := map[string]string{
		"broken": `attempts_exhausted status=500 attempts=3 body="status 500"`,
		"bad":    `rejected status=422 attempts=1 body="status 422"`,
	}
	if diff := cmp.Diff(wantDLQ, got); diff != "" {
		t.Errorf("dead letters (-want +got):\n%s", diff)
	}
	if n := testenv.MetricValue(t, reg, "sluice_retries_total", map[string]string{"tenant": tenant, "kind": "retry_after"}); n != 2 {
		t.Errorf("sluice_retries_total{kind=retry_after} = %v, want 2", n)
	}
}

func TestDrainerDropsExpiredAndCancelledUnsent(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "dr")
	s := newSink(t, nil)
	past := time.Now().Add(-time.Minute)
	future := time.Now().Add(time.Hour)
	push(t, rdb,
		queue.Envelope{ID: "old", Tenant: tenant, Deadline: &past},
		queue.Envelope{ID: "gone", Tenant: tenant},
		queue.Envelope{ID: "ok", Tenant: tenant, Deadline: &future},
	)
	rdb.Set(ctx, keys.JobState(tenant, "gone"), "cancelled", time.Minute)
	reg := prometheus.NewRegistry()
	// Rate 1/s, capacity 1: had the dropped jobs spent outflow turns, "ok"
	// would wait two seconds.
	run(t, drainer.Config{Redis: rdb, Settings: settings(), Registerer: reg,
		Tenants: map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Rate: 1})}})
	start := time.Now()
	testenv.WaitFor(t, 3*time.Second, "the live job", func() bool { return s.count(tenant) == 1 })
	if el := time.Since(start); el > 900*time.Millisecond {
		t.Errorf("live job delivered after %v, want < 900ms (dropped jobs must not spend outflow turns)", el)
	}
	if d := s.deliveries(); d[0].id != "ok" {
		t.Errorf("delivered %s, want ok", d[0].id)
	}
	for _, reason := range []string{"cancelled", "expired"} {
		if n := testenv.MetricValue(t, reg, "sluice_dropped_total", map[string]string{"tenant": tenant, "reason": reason}); n != 1 {
			t.Errorf("sluice_dropped_total{reason=%s} = %v, want 1", reason, n)
		}
	}
}

// TestDrainerOutflowRateAcrossDrainers runs three drainers on one tenant
// with a backlog and measures deliveries at the sink over a real 2-s window
// after the initial burst. Tolerance: ±(capacity + 2) jobs, the slack of
// window edges and scheduling.
func TestDrainerOutflowRateAcrossDrainers(t *testing.T) {
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "dr")
	s := newSink(t, nil)
	const rate, capacity = 40.0, 2.0
	push(t, rdb, jobs(tenant, 400)...)
	tc := map[string]config.Tenant{tenant: tenantCfg(s.srv.URL, config.Outflow{Rate: rate, Capacity: capacity})}
	for i := 0; i < 3; i++ {
		run(t, drainer.Config{Redis: rdb, Settings: settings(), Tenants: tc})
	}
	testenv.WaitFor(t, 3*time.Second, "first deliveries", func() bool { return s.count(tenant) >= 5 })
	time.Sleep(500 * time.Millisecond)
	from := time.Now()
	time.Sleep(2 * time.Second)
	to := time.Now()
	n := 0
	for _, d := range s.deliveries() {
		if !d.at.Before(from) && d.at.Before(to) {
			n++
		}
	}
	want := rate * to.Sub(from).Seconds()
	t.Logf("3 drainers, rate %v: %d deliveries in %v (%.2f/s)", rate, n, to.Sub(from), float64(n)/to.Sub(from).Seconds())
	if float64(n) < want-capacity-2 || float64(n) > want+capacity+2 {
		t.Errorf("delivered %d in %v with 3 drainers, want %.0f ± %v", n, to.Sub(from), want, capacity+2)
	}
}

// TestDrainerNoHeadOfLineBlocking gives tenant A a 10,000-job backlog at
// 10 jobs/s and checks that tenant B's jobs, queued behind it in time, are
// delivered within 1 s each: blocked behind A's backlog, B's jobs would
// wait 1,000 s; unblocked they take tens of ms on a quiet machine (the
// bound leaves room for a loaded one: 211 ms was seen at load 7).
func TestDrainerNoHeadOfLineBlocking(t *testing.T) {
	rdb := testenv.Redis(t)
	a, b := testenv.Name(t, "hol-a"), testenv.Name(t, "hol-b")
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Queue(a), keys.Backlog(a)) })
	s := newSink(t, nil)
	push(t, rdb, jobs(a, 10_000)...)
	run(t, drainer.Config{Redis: rdb, Settings: settings(), Tenants: map[string]config.Tenant{
		a: tenantCfg(s.srv.URL, config.Outflow{Rate: 10}),
		b: tenantCfg(s.srv.URL, config.Outflow{Rate: 1000}),
	}})
	testenv.WaitFor(t, 3*time.Second, "A flowing", func() bool { return s.count(a) >= 1 })
	sent := map[string]time.Time{}
	for i := 0; i < 20; i++ {
		j := queue.Envelope{ID: fmt.Sprintf("%s-%d", b, i), Tenant: b}
		sent[j.ID] = time.Now()
		push(t, rdb, j)
		time.Sleep(10 * time.Millisecond)
	}
	testenv.WaitFor(t, 3*time.Second, "B's 20 jobs", func() bool { return s.count(b) == 20 })
	var worst time.Duration
	for _, d := range s.deliveries() {
		if d.tenant == b {
			worst = max(worst, d.at.Sub(sent[d.id]))
		}
	}
	t.Logf("tenant B worst dispatch delay behind A's backlog: %v", worst)
	if worst > time.Second {
		t.Errorf("B's slowest job took %v behind A's backlog, want < 1s", worst)
	}
}

func TestDrainerShutdownReturnsInFlightJobs(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "dr")
	started := make(chan struct{}, 1)
	h := drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		started <- struct{}{}
		<-ctx.Done() // a delivery that never finishes by itself
		return ctx.Err()
	})
	push(t, rdb, jobs(tenant, 1)...)
	st := settings()
	st.ShutdownTimeout = 300 * time.Millisecond
	stop := run(t, drainer.Config{Redis: rdb, Settings: st, Tenants: map[string]config.Tenant{tenant: {}}, Handler: h})
	<-started
	t0 := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el > time.Second {
		t.Errorf("Run returned %v after cancel, want within the 300ms deadline plus slack", el)
	}
	if n, _ := rdb.LLen(ctx, keys.Queue(tenant)).Result(); n != 1 {
		t.Errorf("queue length after shutdown = %d, want 1 (the in-flight job returned)", n)
	}
	if n, _ := rdb.ZCard(ctx, keys.Processing(tenant)).Result(); n != 0 {
		t.Errorf("leases after shutdown = %d, want 0", n)
	}
}
