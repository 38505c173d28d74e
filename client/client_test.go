package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// script answers the n-th request with steps[n] and records what it saw.
type script struct {
	mu    sync.Mutex
	steps []func(w http.ResponseWriter)
	ids   []string
	auth  []string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var job Job
	_ = json.NewDecoder(r.Body).Decode(&job)
	s.mu.Lock()
	n := len(s.ids)
	s.ids = append(s.ids, job.ID)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	s.steps[min(n, len(s.steps)-1)](w)
}

func status(code int, retryAfter string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"title": http.StatusText(code), "detail": "d", "field": "cost"})
	}
}

func accepted(w http.ResponseWriter) {
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(Accepted{JobID: "j1", Tenant: "acme"})
}

// newTest returns a client whose sleeps are recorded instead of slept.
func newTest(t *testing.T, s *script, opts ...Option) (*Client, *[]time.Duration) {
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	var slept []time.Duration
	c := New(srv.URL, "key", opts...)
	c.cfg.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	return c, &slept
}

func TestHonoursRetryAfter(t *testing.T) {
	s := &script{steps: []func(http.ResponseWriter){status(429, "2"), status(503, "1"), accepted}}
	c, slept := newTest(t, s)
	acc, err := c.Submit(context.Background(), Job{Type: "email"})
	if err != nil {
		t.Fatal(err)
	}
	if acc.JobID != "j1" {
		t.Errorf("JobID = %q, want j1", acc.JobID)
	}
	if diff := cmp.Diff([]time.Duration{2 * time.Second, time.Second}, *slept); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if s.ids[0] == "" || s.ids[0] != s.ids[1] || s.ids[1] != s.ids[2] {
		t.Errorf("job ids across retries = %v, want one generated id repeated", s.ids)
	}
	if s.auth[0] != "Bearer key" {
		t.Errorf("Authorization = %q", s.auth[0])
	}
}

func TestBackoffWithJitterUnderCap(t *testing.T) {
	s := &script{steps: []func(http.ResponseWriter){status(429, "")}}
	c, slept := newTest(t, s, WithMaxTries(6), WithBackoff(100*time.Millisecond, 400*time.Millisecond))
	_, err := c.Submit(context.Background(), Job{Type: "email"})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 429 || apiErr.Tries != 6 {
		t.Fatalf("err = %v, want *Error 429 after 6 tries", err)
	}
	if len(*slept) != 5 {
		t.Fatalf("waits = %v, want 5", *slept)
	}
	for k, d := range *slept {
		ceil := min(400*time.Millisecond, 100*time.Millisecond<<k)
		if d < 0 || d > ceil {
			t.Errorf("wait %d = %s, want within [0, %s]", k, d, ceil)
		}
	}
}

func TestDoesNotRetryClientErrors(t *testing.T) {
	s := &script{steps: []func(http.ResponseWriter){status(422, "")}}
	c, slept := newTest(t, s)
	_, err := c.Submit(context.Background(), Job{Type: "email", Cost: -1})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 422 || apiErr.Field != "cost" || apiErr.Temporary() {
		t.Fatalf("err = %#v, want a permanent 422 naming cost", err)
	}
	if len(*slept) != 0 || len(s.ids) != 1 {
		t.Errorf("waits %v, requests %d; want no retry", *slept, len(s.ids))
	}
}

func TestRetryAfterBeyondMaxReturnsAtOnce(t *testing.T) {
	s := &script{steps: []func(http.ResponseWriter){status(429, "3600")}}
	c, slept := newTest(t, s, WithMaxRetryAfter(time.Minute))
	_, err := c.Submit(context.Background(), Job{Type: "email"})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.RetryAfter != time.Hour {
		t.Fatalf("err = %v, want *Error with RetryAfter 1h", err)
	}
	if len(*slept) != 0 {
		t.Errorf("waited %v, want no wait", *slept)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{"-1", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Second).Format(http.TimeFormat), 0},
	} {
		if got := parseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestContextCancelStopsWaiting(t *testing.T) {
	s := &script{steps: []func(http.ResponseWriter){status(503, "30")}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := New(srv.URL, "k").Submit(ctx, Job{Type: "x"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

// TestRetriesConflictWithRetryAfter: a 409 with Retry-After (another
// request holds the id, e.g. one whose ingest died mid-way) is retried with
// the same id; a 409 without it is final.
func TestRetriesConflictWithRetryAfter(t *testing.T) {
	s := &script{steps: []func(http.ResponseWriter){status(409, "1"), accepted}}
	c, slept := newTest(t, s)
	if _, err := c.Submit(context.Background(), Job{Type: "email", ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]time.Duration{time.Second}, *slept); diff != "" || s.ids[0] != "a" || s.ids[1] != "a" {
		t.Errorf("waits (-want +got):\n%s; ids %v", diff, s.ids)
	}
	s = &script{steps: []func(http.ResponseWriter){status(409, "")}}
	c, slept = newTest(t, s)
	_, err := c.Submit(context.Background(), Job{Type: "email"})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Temporary() || len(*slept) != 0 {
		t.Fatalf("err = %v, waits %v; want a final 409 without retry", err, *slept)
	}
}
