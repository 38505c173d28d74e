// Package demosink is a small downstream for demos and tests: it accepts a
// POST on any path, counts each job per tenant, spots job ids it has already
// accepted (at-least-once redelivery shows up as duplicates), and can refuse
// a fraction of requests with 503 + Retry-After and answer slowly, so that
// retries and adaptive backoff have something to react to.
package demosink

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// Headers the drainer sends with every job.
const (
	HeaderJobID  = "Sluice-Job-Id"
	HeaderTenant = "Sluice-Tenant"
)

// Config holds the sink's behaviour; the zero value accepts everything at once.
type Config struct {
	// FailRate is the fraction of POSTs answered 503 with Retry-After: 1
	// (default 0). A refused job is not counted as received.
	FailRate float64
	// Latency is waited before each POST is answered (default 0). A request
	// whose client goes away meanwhile is dropped uncounted.
	Latency time.Duration
	// Window is the span of the recent rate: rate = jobs accepted in the
	// last Window ÷ Window, counted in whole seconds (default 10s).
	Window time.Duration
	// MaxIDs bounds the job ids kept for duplicate detection (default
	// 1,000,000): two generations of MaxIDs/2 ids each, the older dropped
	// when the newer is full, so a duplicate is spotted when it comes back
	// within at least the last MaxIDs/2 accepted jobs.
	MaxIDs int
	// Clock is the clock (nil: clock.Real).
	Clock clock.Clock
	// Rand returns a uniform number in [0, 1) (default math/rand/v2.Float64).
	Rand func() float64
}

// Stats is the JSON answer of GET /stats.
type Stats struct {
	// Received counts accepted jobs (2xx answers), duplicates included.
	Received int64 `json:"received"`
	// Duplicates counts accepted jobs whose id had been accepted before.
	Duplicates int64 `json:"duplicates"`
	// Refused counts POSTs answered 503 because of FailRate.
	Refused int64 `json:"refused"`
	// Tenants holds the same per tenant (Sluice-Tenant; "unknown" when absent).
	Tenants map[string]TenantStats `json:"tenants"`
}

// TenantStats is one tenant's share of Stats.
type TenantStats struct {
	Received   int64 `json:"received"`
	Duplicates int64 `json:"duplicates"`
	Refused    int64 `json:"refused"`
	// Rate is jobs accepted per second over the last Config.Window.
	Rate float64 `json:"rate"`
}

// Sink records deliveries. It is an http.Handler and safe for concurrent use.
type Sink struct {
	cfg     Config
	seconds int64 // Window in whole seconds

	mu       sync.Mutex
	received int64
	dups     int64
	refused  int64
	tenants  map[string]*tenant
	ids      [2]map[string]struct{} // ids[0] current generation, ids[1] previous
}

// tenant is one tenant's counters and a ring of per-second accept counts.
type tenant struct {
	received, dups, refused int64
	ring                    []bucket
}

type bucket struct {
	sec int64 // unix second this bucket counts
	n   int64
}

// New returns a Sink with cfg's defaults filled in.
func New(cfg Config) *Sink {
	if cfg.Window < time.Second {
		cfg.Window = 10 * time.Second
	}
	if cfg.MaxIDs < 2 {
		cfg.MaxIDs = 1_000_000
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Sink{
		cfg:     cfg,
		seconds: int64(cfg.Window / time.Second),
		tenants: map[string]*tenant{},
		ids:     [2]map[string]struct{}{{}, {}},
	}
}

// ServeHTTP answers GET /stats with Stats as JSON, a POST on any path by
// recording the job (204, or 503 + Retry-After: 1 for a FailRate share), and
// anything else with 405.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/stats":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Stats())
	case r.Method == http.MethodPost:
		s.receive(w, r)
	default:
		w.Header().Set("Allow", "GET /stats, POST")
		http.Error(w, "POST a job on any path, or GET /stats", http.StatusMethodNotAllowed)
	}
}

func (s *Sink) receive(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if s.cfg.Latency > 0 {
		t := time.NewTimer(s.cfg.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	name := r.Header.Get(HeaderTenant)
	if name == "" {
		name = "unknown"
	}
	if s.cfg.FailRate > 0 && s.cfg.Rand() < s.cfg.FailRate {
		s.mu.Lock()
		s.refused++
		s.tenant(name).refused++
		s.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "demosink: refused on purpose (--fail-rate)", http.StatusServiceUnavailable)
		return
	}
	s.Record(name, r.Header.Get(HeaderJobID), s.cfg.Clock.Now())
	w.WriteHeader(http.StatusNoContent)
}

// Record counts one accepted job of tenant at now; jobID, when not empty,
// is checked against the ids accepted before. It reports whether the job
// was a duplicate.
func (s *Sink) Record(tenantName, jobID string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenant(tenantName)
	s.received++
	t.received++
	sec := now.Unix()
	b := &t.ring[int(sec%int64(len(t.ring)))]
	if b.sec != sec {
		*b = bucket{sec: sec}
	}
	b.n++
	if jobID == "" {
		return false
	}
	_, seen := s.ids[0][jobID]
	if !seen {
		_, seen = s.ids[1][jobID]
	}
	if seen {
		s.dups++
		t.dups++
		return true
	}
	if len(s.ids[0]) >= s.cfg.MaxIDs/2 {
		s.ids[1], s.ids[0] = s.ids[0], make(map[string]struct{}, s.cfg.MaxIDs/2)
	}
	s.ids[0][jobID] = struct{}{}
	return false
}

// maxTenants bounds the tenants tracked by name; jobs of further tenants
// are counted under "other", so a stray header cannot grow memory unbounded.
const maxTenants = 1000

// tenant returns name's counters, creating them; s.mu must be held.
func (s *Sink) tenant(name string) *tenant {
	t, ok := s.tenants[name]
	if !ok && len(s.tenants) >= maxTenants {
		name = "other"
		t, ok = s.tenants[name]
	}
	if !ok {
		// One slot per second of the window plus the current second.
		t = &tenant{ring: make([]bucket, s.seconds+1)}
		s.tenants[name] = t
	}
	return t
}

// Stats returns the counters and each tenant's rate over the Window that
// ends with the last whole second before Config.Clock (the current second
// is still filling and would understate it).
func (s *Sink) Stats() Stats {
	now := s.cfg.Clock.Now().Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Received: s.received, Duplicates: s.dups, Refused: s.refused, Tenants: make(map[string]TenantStats, len(s.tenants))}
	for name, t := range s.tenants {
		var n int64
		for _, b := range t.ring {
			if b.sec < now && b.sec >= now-s.seconds {
				n += b.n
			}
		}
		st.Tenants[name] = TenantStats{
			Received: t.received, Duplicates: t.dups, Refused: t.refused,
			Rate: float64(n) / float64(s.seconds),
		}
	}
	return st
}

// TenantNames returns the tenants seen so far, sorted.
func (st Stats) TenantNames() []string {
	names := make([]string, 0, len(st.Tenants))
	for name := range st.Tenants {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
