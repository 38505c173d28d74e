package ingest

import (
	"context"
	"net/http"
)

// readyChecker is implemented by producers that can tell whether their
// backend is reachable (the Kafka producer asks for the topic's metadata).
type readyChecker interface {
	Ready(ctx context.Context) error
}

// healthAnswer is the body of /healthz and /readyz.
type healthAnswer struct {
	// Status is "ok", "unavailable" or "shutting_down".
	Status string `json:"status"`
	// Checks holds "ok" or the error of each dependency: "redis", "queue".
	Checks map[string]string `json:"checks,omitempty"`
}

// handleHealthz answers 200 while the process serves HTTP at all.
func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, healthAnswer{Status: "ok"})
}

// handleReadyz answers 200 when Redis answers PING within the Redis timeout
// and the producer's backend is reachable, 503 naming what is down
// otherwise, and 503 as soon as shutdown has begun so that load balancers
// stop sending.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, healthAnswer{Status: "shutting_down"})
		return
	}
	snap := s.snap.Load()
	ctx, cancel := context.WithTimeout(r.Context(), snap.redisTimeout)
	defer cancel()
	checks := map[string]string{"redis": "ok", "queue": "ok"}
	ready := true
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		checks["redis"] = err.Error()
		ready = false
	}
	if rc, ok := s.producer.(readyChecker); ok {
		if err := rc.Ready(ctx); err != nil {
			checks["queue"] = err.Error()
			ready = false
		}
	}
	if !ready {
		writeJSON(w, http.StatusServiceUnavailable, healthAnswer{Status: "unavailable", Checks: checks})
		return
	}
	writeJSON(w, http.StatusOK, healthAnswer{Status: "ok", Checks: checks})
}
