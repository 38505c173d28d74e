//go:build chaos

package chaos

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/demosink"
)

// delivery is one POST the sink accepted.
type delivery struct {
	at      time.Time
	attempt int // Sluice-Attempt
	tenant  string
}

// sink is the downstream of every tenant: an HTTP server in the test
// process that accepts every POST at once (204) and records it by job id
// (Sluice-Job-Id) with its time and Sluice-Attempt.
type sink struct {
	srv *httptest.Server

	mu    sync.Mutex
	byID  map[string][]delivery
	total int
}

func newSink(t testing.TB) *sink {
	s := &sink{byID: map[string][]delivery{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	attempt, _ := strconv.Atoi(r.Header.Get("Sluice-Attempt"))
	d := delivery{at: time.Now(), attempt: attempt, tenant: r.Header.Get(demosink.HeaderTenant)}
	id := r.Header.Get(demosink.HeaderJobID)
	s.mu.Lock()
	s.byID[id] = append(s.byID[id], d)
	s.total++
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// url is the target URL of tenant.
func (s *sink) url(tenant string) string { return s.srv.URL + "/" + tenant }

// count returns how many of ids the sink has received at least once.
func (s *sink) count(ids []string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if len(s.byID[id]) > 0 {
			n++
		}
	}
	return n
}

// deliveries returns a copy of every job's deliveries, in arrival order.
func (s *sink) deliveries() map[string][]delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]delivery, len(s.byID))
	for id, ds := range s.byID {
		out[id] = append([]delivery(nil), ds...)
	}
	return out
}

// times returns the time of every delivery of tenant, sorted.
func times(all map[string][]delivery, tenant string) []time.Time {
	var out []time.Time
	for _, ds := range all {
		for _, d := range ds {
			if d.tenant == tenant {
				out = append(out, d.at)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}
