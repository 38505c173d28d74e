package drainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/queue"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	tests := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0.999999, 100 * time.Millisecond},
		{1, 0.5, 50 * time.Millisecond},
		{2, 0.5, 100 * time.Millisecond},
		{4, 1, 800 * time.Millisecond},
		{5, 1, time.Second}, // capped
		{40, 0.25, 250 * time.Millisecond},
		{3, 0, 0}, // full jitter reaches 0
	}
	for _, tc := range tests {
		if got := b.Delay(tc.n, tc.r); got.Round(time.Millisecond) != tc.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tc.n, tc.r, got, tc.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 7 ", 7 * time.Second, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{"99999999", time.Hour, true},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
	}
	for _, tc := range tests {
		got, ok := ParseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestHTTPSinkClassifies(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, _ := strconv.Atoi(r.URL.Query().Get("status"))
		ra := r.URL.Query().Get("ra")
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		if status == 0 {
			time.Sleep(200 * time.Millisecond) // slower than the target timeout
			return
		}
		w.WriteHeader(status)
		io.WriteString(w, "why")
	}))
	defer srv.Close()
	// The job type carries the answer the server gives: "status/retry-after".
	targets := func(tenant, typ string) (config.Target, bool) {
		if tenant == "none" {
			return config.Target{}, false
		}
		st, ra, _ := strings.Cut(typ, "/")
		return config.Target{URL: srv.URL + "?status=" + st + "&ra=" + ra, Timeout: 100 * time.Millisecond}, true
	}
	s := NewHTTPSink(nil, targets)
	tests := []struct {
		status int
		ra     string
		tenant string
		want   outcome
	}{
		{200, "", "t", outDone},
		{204, "", "t", outDone},
		{429, "2", "t", outRetryAfter},
		{503, "1", "t", outRetryAfter},
		{429, "", "t", outRetry},
		{503, "", "t", outRetry},
		{500, "3", "t", outRetry},
		{502, "", "t", outRetry},
		{400, "", "t", outDead},
		{404, "", "t", outDead},
		{301, "", "t", outDead},
		{0, "", "t", outRetry}, // timeout
		{200, "", "none", outDead},
	}
	for _, tc := range tests {
		typ := fmt.Sprintf("%d/%s", tc.status, tc.ra)
		err := s.Handle(context.Background(), queue.Envelope{ID: "j", Tenant: tc.tenant, Type: typ})
		if got, _ := classify(err, false); got != tc.want {
			t.Errorf("status %d Retry-After %q tenant %s: outcome %d (err %v), want %d", tc.status, tc.ra, tc.tenant, got, err, tc.want)
		}
	}
	err := s.Handle(context.Background(), queue.Envelope{ID: "j", Tenant: "t", Type: "429/2"})
	var rae *RetryAfterError
	if !errors.As(err, &rae) || rae.After != 2*time.Second || rae.Body != "why" {
		t.Errorf("429 Retry-After 2: err = %#v, want After 2s and body %q", err, "why")
	}
}

func BenchmarkHTTPSinkHandle(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	s := NewHTTPSink(nil, func(string, string) (config.Target, bool) { return config.Target{URL: srv.URL}, true })
	job := queue.Envelope{ID: "j", Tenant: "t", Payload: []byte(`{"to":"x@example.com"}`)}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Handle(ctx, job); err != nil {
			b.Fatal(err)
		}
	}
}

// ExampleHandlerFunc embeds the drainer in a Go program: jobs are handed to
// a function instead of an HTTP POST.
func ExampleHandlerFunc() {
	h := HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		if job.Type == "unknown" {
			return Permanent(fmt.Errorf("no such job type")) // dead-lettered at once
		}
		if job.Attempt == 0 {
			return RetryAfter(time.Second) // retried in 1s; no attempt spent
		}
		return nil // done
	})
	fmt.Println(h.Handle(context.Background(), queue.Envelope{ID: "1", Type: "mail"}))
	fmt.Println(h.Handle(context.Background(), queue.Envelope{ID: "1", Type: "mail", Attempt: 1}))
	// Output:
	// drainer: downstream asked to retry after 1s (status 0)
	// <nil>
}
