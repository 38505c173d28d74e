package demosink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/demosink"
)

var t0 = time.Unix(1_800_000_000, 0)

type delivery struct {
	tenant, id string
	at         time.Duration // after t0
}

func TestRecordCountsAndRates(t *testing.T) {
	tests := []struct {
		name   string
		window time.Duration
		jobs   []delivery
		now    time.Duration // Stats is read at t0+now
		want   demosink.Stats
	}{
		{
			name: "duplicates by job id, per tenant",
			jobs: []delivery{{"acme", "a1", 0}, {"acme", "a2", 0}, {"acme", "a1", 0}, {"globex", "g1", 0}, {"globex", "", 0}, {"globex", "", 0}},
			now:  time.Second,
			want: demosink.Stats{Received: 6, Duplicates: 1, Tenants: map[string]demosink.TenantStats{
				"acme":   {Received: 3, Duplicates: 1, Rate: 0.3},
				"globex": {Received: 3, Rate: 0.3},
			}},
		},
		{
			name: "the current second is left out of the rate",
			jobs: []delivery{{"acme", "a1", 9 * time.Second}, {"acme", "a2", 10 * time.Second}},
			now:  10*time.Second + 500*time.Millisecond,
			want: demosink.Stats{Received: 2, Tenants: map[string]demosink.TenantStats{"acme": {Received: 2, Rate: 0.1}}},
		},
		{
			name: "seconds older than the window are left out",
			jobs: []delivery{{"acme", "a1", 0}, {"acme", "a2", time.Second}, {"acme", "a3", 5 * time.Second}},
			now:  11 * time.Second, // window is seconds 1..10
			want: demosink.Stats{Received: 3, Tenants: map[string]demosink.TenantStats{"acme": {Received: 3, Rate: 0.2}}},
		},
		{
			name:   "5 jobs a second for 4 s over a 2 s window",
			window: 2 * time.Second,
			jobs:   steady("acme", 5, 4),
			now:    4 * time.Second,
			want:   demosink.Stats{Received: 20, Tenants: map[string]demosink.TenantStats{"acme": {Received: 20, Rate: 5}}},
		},
		{
			name: "a slot reused after the ring wraps starts from zero",
			jobs: []delivery{{"acme", "a1", 0}, {"acme", "a2", 11 * time.Second}},
			now:  12 * time.Second,
			want: demosink.Stats{Received: 2, Tenants: map[string]demosink.TenantStats{"acme": {Received: 2, Rate: 0.1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0.Add(tt.now)
			s := demosink.New(demosink.Config{Window: tt.window, Clock: clock.Func(func() time.Time { return now })})
			for _, j := range tt.jobs {
				s.Record(j.tenant, j.id, t0.Add(j.at))
			}
			if diff := cmp.Diff(tt.want, s.Stats()); diff != "" {
				t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// steady is perSec jobs of tenant in each of the first secs seconds.
func steady(tenant string, perSec, secs int) []delivery {
	var jobs []delivery
	for sec := range secs {
		for i := range perSec {
			jobs = append(jobs, delivery{tenant, fmt.Sprintf("%d-%d", sec, i), time.Duration(sec) * time.Second})
		}
	}
	return jobs
}

func TestDuplicateMemoryIsBounded(t *testing.T) {
	s := demosink.New(demosink.Config{MaxIDs: 4}) // generations of 2 ids
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		if s.Record("acme", id, t0) {
			t.Fatalf("Record(%s) = duplicate, want new", id)
		}
	}
	// Generations now: {5} current, {3 4} previous; 1 and 2 were forgotten.
	got := map[string]bool{}
	for _, id := range []string{"4", "5", "1"} {
		got[id] = s.Record("acme", id, t0)
	}
	want := map[string]bool{"4": true, "5": true, "1": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("duplicate by id mismatch (-want +got):\n%s", diff)
	}
}

func TestHTTP(t *testing.T) {
	draws := []float64{0.5, 0.01, 0.9} // FailRate 0.05: the second POST is refused
	s := demosink.New(demosink.Config{FailRate: 0.05, Rand: func() float64 {
		d := draws[0]
		draws = draws[1:]
		return d
	}})
	srv := httptest.NewServer(s)
	defer srv.Close()

	type answer struct {
		Code       int
		RetryAfter string
	}
	var got []answer
	for _, id := range []string{"j1", "j2", "j1"} {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/any/path", strings.NewReader(`{"x":1}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(demosink.HeaderTenant, "acme")
		req.Header.Set(demosink.HeaderJobID, id)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		resp.Body.Close()
		got = append(got, answer{resp.StatusCode, resp.Header.Get("Retry-After")})
	}
	resp, err := srv.Client().Get(srv.URL + "/stats")
	if err != nil {
		t.Fatalf("GET /stats: %v", err)
	}
	defer resp.Body.Close()
	var stats demosink.Stats
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		t.Fatalf("decode /stats: %v", err)
	}
	stats.Tenants["acme"] = demosink.TenantStats{Received: stats.Tenants["acme"].Received, Duplicates: stats.Tenants["acme"].Duplicates, Refused: stats.Tenants["acme"].Refused}

	want := []answer{{http.StatusNoContent, ""}, {http.StatusServiceUnavailable, "1"}, {http.StatusNoContent, ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers mismatch (-want +got):\n%s", diff)
	}
	wantStats := demosink.Stats{Received: 2, Duplicates: 1, Refused: 1,
		Tenants: map[string]demosink.TenantStats{"acme": {Received: 2, Duplicates: 1, Refused: 1}}}
	if diff := cmp.Diff(wantStats, stats); diff != "" {
		t.Errorf("/stats mismatch (-want +got):\n%s", diff)
	}

	resp, err = srv.Client().Get(srv.URL + "/hook")
	if err != nil {
		t.Fatalf("GET /hook: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /hook = %d, want %d", resp.StatusCode, http.StatusMethodNotAllowed)
	}
}

func TestLatency(t *testing.T) {
	const latency = 50 * time.Millisecond
	s := demosink.New(demosink.Config{Latency: latency})

	start := time.Now()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/hook", nil))
	if took := time.Since(start); rec.Code != http.StatusNoContent || took < latency {
		t.Errorf("POST = %d after %v, want %d after at least %v", rec.Code, took, http.StatusNoContent, latency)
	}

	// A client that gives up during the wait is not counted.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/hook", nil).WithContext(ctx))
	if got := s.Stats().Received; got != 1 {
		t.Errorf("Received = %d, want 1 (the cancelled request is not counted)", got)
	}
}

func TestLogLine(t *testing.T) {
	now := t0.Add(10 * time.Second)
	s := demosink.New(demosink.Config{Clock: clock.Func(func() time.Time { return now })})
	for _, j := range steady("acme", 3, 10) {
		s.Record(j.tenant, j.id, t0.Add(j.at))
	}
	s.Record("globex", "g", t0)
	lines := make(lineWriter, 16)
	log := slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{ReplaceAttr: dropTime}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Log(ctx, log, time.Millisecond)
	var first string
	select {
	case first = <-lines:
	case <-time.After(5 * time.Second):
		t.Fatal("no log line within 5s at an interval of 1ms")
	}
	want := "level=INFO msg=rates received=31 duplicates=0 refused=0 rate.acme=3 rate.globex=0.1\n"
	if first != want {
		t.Errorf("log line\n got: %s\nwant: %s", first, want)
	}
}

// lineWriter hands each Write (slog writes one whole line at a time) to the
// test; lines beyond its buffer are dropped.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default:
	}
	return len(p), nil
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func ExampleSink() {
	sink := demosink.New(demosink.Config{})
	for _, id := range []string{"job-1", "job-2", "job-1"} {
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader("{}"))
		req.Header.Set(demosink.HeaderTenant, "acme")
		req.Header.Set(demosink.HeaderJobID, id)
		sink.ServeHTTP(httptest.NewRecorder(), req)
	}
	st := sink.Stats()
	fmt.Println("received", st.Received, "duplicates", st.Duplicates, "acme", st.Tenants["acme"].Received)
	// Output: received 3 duplicates 1 acme 3
}

func BenchmarkRecord(b *testing.B) {
	s := demosink.New(demosink.Config{})
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = "job-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Record("acme", ids[i%len(ids)], t0)
	}
}
