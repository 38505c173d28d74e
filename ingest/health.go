package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafkaReadyTimeout bounds /readyz's metadata request to the brokers.
const kafkaReadyTimeout = time.Second

// readyChecker is implemented by producers that can tell whether their
// backend is reachable. A producer without it is checked by backend: the
// Redis backend by the PING of /readyz (cmd/ingest gives both one client),
// the Kafka backend by a metadata request for the topic (kafkaReady).
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
	if err := s.queueReady(r.Context(), snap); err != nil {
		checks["queue"] = err.Error()
		ready = false
	}
	if !ready {
		writeJSON(w, http.StatusServiceUnavailable, healthAnswer{Status: "unavailable", Checks: checks})
		return
	}
	writeJSON(w, http.StatusOK, healthAnswer{Status: "ok", Checks: checks})
}

// queueReady reports whether the queue backend can take jobs.
func (s *Server) queueReady(ctx context.Context, snap *snapshot) error {
	if rc, ok := s.producer.(readyChecker); ok {
		ctx, cancel := context.WithTimeout(ctx, kafkaReadyTimeout)
		defer cancel()
		return rc.Ready(ctx)
	}
	if snap.backend != "kafka" {
		return nil
	}
	return kafkaReady(ctx, snap.kafkaBrokers, snap.kafkaTopic)
}

// kafkaReady asks a broker for the topic's partitions on a fresh connection
// (kafka-go's Transport answers metadata from its cache, which would hide a
// stopped broker) and checks that every partition has a leader. The first
// broker that answers decides.
func kafkaReady(ctx context.Context, brokers []string, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, kafkaReadyTimeout)
	defer cancel()
	var errs []error
	for _, b := range brokers {
		conn, err := (&kafka.Dialer{Timeout: kafkaReadyTimeout}).DialContext(ctx, "tcp", b)
		if err != nil {
			errs = append(errs, fmt.Errorf("kafka %s: %w", b, err))
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(kafkaReadyTimeout))
		parts, err := conn.ReadPartitions(topic)
		conn.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("kafka %s: partitions of %s: %w", b, topic, err))
			continue
		}
		for _, p := range parts {
			if p.Leader.Host == "" {
				return fmt.Errorf("kafka topic %s: partition %d has no leader", topic, p.ID)
			}
		}
		return nil
	}
	return errors.Join(errs...)
}
