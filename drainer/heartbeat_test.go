package drainer_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// TestHeartbeatJobDroppedAtHead, on both backends: a heartbeat job whose
// last beat is older than its interval when it reaches the head of its lane
// is dropped unsent (state expired, reason heartbeat, counted in
// sluice_dropped_total{reason="heartbeat"}) without an outflow turn (the
// bucket's water level counts only the delivered jobs), while the jobs
// behind it are delivered: an ordinary one, one whose submitter polled
// (beat_at recent) and one enqueued just now. The dropped job leaves the
// head: the dispatched sequence passes it.
func TestHeartbeatJobDroppedAtHead(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			t.Parallel()
			tenant := testenv.Name(t, "beat")
			s := newStack(t, be, tenant, slowOutflow)
			ctx := context.Background()
			old := time.Now().Add(-10 * time.Second)
			job := func(id string, hb time.Duration, at time.Time) queue.Envelope {
				return queue.Envelope{ID: id, Tenant: tenant, Type: "mail", Cost: 1, Payload: []byte(`{}`),
					EnqueuedAt: at, HeartbeatMS: hb.Milliseconds()}
			}
			s.enqueue(job("lapsed", 2*time.Second, old), job("plain", 0, old), job("polled", 2*time.Second, old), job("fresh", time.Minute, time.Now()))
			if err := s.rdb.HSet(ctx, keys.JobState(tenant, "polled"), "beat_at", time.Now().UnixMilli()).Err(); err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			s.start(reg)
			for _, id := range []string{"plain", "polled", "fresh"} {
				testenv.WaitFor(t, 15*time.Second, id+" delivered", func() bool { return !s.deliveredAt(id).IsZero() })
			}
			testenv.WaitFor(t, 2*time.Second, "the lapsed job expired", func() bool {
				r, _ := jobstate.Get(ctx, s.rdb, tenant, "lapsed")
				return r.State == jobstate.Expired
			})
			r, _ := jobstate.Get(ctx, s.rdb, tenant, "lapsed")
			if r.Reason != queue.ReasonHeartbeat || !s.deliveredAt("lapsed").IsZero() {
				t.Errorf("lapsed job: reason %q, delivered %v; want heartbeat, never", r.Reason, !s.deliveredAt("lapsed").IsZero())
			}
			if v := testenv.MetricValue(t, reg, "sluice_dropped_total", map[string]string{"tenant": tenant, "reason": "heartbeat"}); v != 1 {
				t.Errorf("sluice_dropped_total{reason=heartbeat} = %v, want 1", v)
			}
			if w := s.water(); w != 3 {
				t.Errorf("water level %d, want 3 (the delivered jobs' turns only)", w)
			}
			if gone, _ := s.rdb.Get(ctx, keys.JobsDispatched(tenant)).Int64(); gone < r.Seq {
				t.Errorf("dispatched sequence %d, want past the dropped job's seq %d", gone, r.Seq)
			}
		})
	}
}
