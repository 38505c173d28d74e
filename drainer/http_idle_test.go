package drainer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/queue"
)

// TestHTTPSinkManyConnsNoSpuriousError: with more deliveries in flight than
// the transport would keep idle in all (net/http's MaxIdleConns, 100 in
// DefaultTransport), a 204 answer must never come back as an error. Go's
// transport puts a connection answered without a body back in the idle pool
// before it hands the answer over; when that pool is over MaxIdleConns it
// closes its oldest connection, which may be one whose answer has not been
// handed over yet, and that request then fails with "putIdleConn: too many
// idle connections" although the downstream got it: the drainer retried it,
// a duplicate delivery. So the sink's transport has no total idle limit
// (MaxIdleConns 0; IdleConnTimeout still closes idle ones).
func TestHTTPSinkManyConnsNoSpuriousError(t *testing.T) {
	// Not parallel: its 500 senders saturate the CPU, and the package's
	// parallel tests with short timeouts (TestHTTPSinkClassifies: 100 ms)
	// would time out beside it.
	var arrivals atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivals.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	s := NewHTTPSink(nil, func(string, string) (config.Target, bool) { return config.Target{URL: srv.URL}, true })
	tr, ok := s.rt.(*http.Transport)
	if !ok {
		t.Fatalf("the sink sends through %T, want its own *http.Transport", s.rt)
	}
	if tr.MaxIdleConns != 0 {
		t.Fatalf("sink transport MaxIdleConns = %d, want 0 (no total idle limit)", tr.MaxIdleConns)
	}
	// The check above is the deterministic one. These rounds show the
	// failure itself: with MaxIdleConns 100, 12 such rounds failed in 7 of
	// 10 runs on this project's 2-core machine (the race needs a scheduling
	// delay); with 0, none has.
	const workers, each = 500, 20
	rounds := 6
	if raceOn {
		rounds = 2 // about 4 s under -race instead of 12
	}
	var failed atomic.Int64
	var firstErr atomic.Value
	for r := range rounds {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					id := strconv.Itoa(r) + "-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
					if err := s.Handle(context.Background(), queue.Envelope{ID: id, Tenant: "t", Payload: []byte(`{}`)}); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			}()
		}
		wg.Wait()
		if failed.Load() > 0 {
			break
		}
	}
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d deliveries failed although the sink answered 204 to every one (%d arrivals); first: %v",
			n, arrivals.Load(), firstErr.Load())
	}
	if got, want := arrivals.Load(), int64(rounds*workers*each); got != want {
		t.Errorf("arrivals = %d, want %d", got, want)
	}
}

// TestHTTPSinkErrorNamesTarget: a delivery that cannot reach its target
// fails with an error naming the job and the URL (as http.Client words it),
// and it is retried, not dead-lettered.
func TestHTTPSinkErrorNamesTarget(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	target := srv.URL + "/hook"
	srv.Close() // nothing listens there now
	s := NewHTTPSink(nil, func(string, string) (config.Target, bool) { return config.Target{URL: target}, true })
	err := s.Handle(context.Background(), queue.Envelope{ID: "j1", Tenant: "t", Payload: []byte(`{}`)})
	if err == nil {
		t.Fatal("post to a closed port: no error")
	}
	if want := `drainer: post job j1: Post "` + target + `": `; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %q, want it to start with %q", err, want)
	}
	if o, _ := classify(err, false); o != outRetry {
		t.Errorf("classify(%v) = %v, want outRetry", err, o)
	}
}

// TestHTTPSinkURLCredentials: a target URL with user and password is sent
// with Basic auth (as http.Client sends it), and an error names the URL
// with the password redacted.
func TestHTTPSinkURLCredentials(t *testing.T) {
	t.Parallel()
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		got.Store(strconv.FormatBool(ok) + " " + u + ":" + p)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	withUser := func(base string) string { return strings.Replace(base, "http://", "http://hook:s3cret@", 1) + "/hook" }
	target := withUser(srv.URL)
	s := NewHTTPSink(nil, func(string, string) (config.Target, bool) { return config.Target{URL: target}, true })
	if err := s.Handle(context.Background(), queue.Envelope{ID: "j1", Tenant: "t", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if g, _ := got.Load().(string); g != "true hook:s3cret" {
		t.Errorf("Basic auth at the target = %q, want %q", g, "true hook:s3cret")
	}

	down := httptest.NewServer(http.NotFoundHandler())
	target = withUser(down.URL)
	down.Close()
	err := s.Handle(context.Background(), queue.Envelope{ID: "j2", Tenant: "t", Payload: []byte(`{}`)})
	if err == nil {
		t.Fatal("post to a closed port: no error")
	}
	if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "hook:xxxxx@") {
		t.Errorf("error = %q, want the URL with its password redacted (hook:xxxxx@)", err)
	}
}
