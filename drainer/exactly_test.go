package drainer_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/backend"
)

// deliveries returns how many times the stack's handler was given id, and
// the Sluice-Attempt of each.
func (s *stack) deliveries(id string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, d := range s.seen {
		if d.id == id {
			out = append(out, d.attempt)
		}
	}
	return out
}

// queueCopy puts a second copy of env on the stack's queue as an enqueue
// sent twice leaves it: on Kafka through the producer (a second record; the
// state write after the ack changes nothing for the same enqueued_at), on
// Redis straight onto the list with its backlog (enqueue.lua itself skips
// the copy), so the drainer's rule is what is tested.
func (s *stack) queueCopy(env queue.Envelope) {
	s.t.Helper()
	if s.cfg.Backend == backend.Kafka {
		s.enqueue(env)
		return
	}
	raw, err := env.Encode()
	if err != nil {
		s.t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.rdb.RPush(ctx, keys.Queue(s.tenant), raw).Err(); err != nil {
		s.t.Fatal(err)
	}
	s.rdb.IncrBy(ctx, keys.Backlog(s.tenant), env.Cost)
}

// TestDoneJobCopySkipped: a copy of a job whose delivery succeeded (the same
// id and enqueued_at, its state done) is settled unsent, without a delivery
// or an outflow turn, and counted in sluice_jobs_duplicate_skipped_total; its
// state stays done and the backlog ends at 0. A job reusing the id with
// another enqueued_at is another job, and is delivered.
func TestDoneJobCopySkipped(t *testing.T) {
	t.Parallel()
	for _, name := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tenant := testenv.Name(t, "dup")
			s := newStack(t, name, tenant, config.Outflow{})
			reg := prometheus.NewRegistry()
			s.start(reg)
			at := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
			env := queue.Envelope{Version: queue.EnvelopeVersion, ID: "j1", Tenant: tenant, Type: "mail", Cost: 1,
				Payload: []byte(`{}`), EnqueuedAt: at}
			s.enqueue(env)
			ctx := context.Background()
			testenv.WaitFor(t, 20*time.Second, "j1 done", func() bool {
				rec, err := jobstate.Get(ctx, s.rdb, tenant, "j1")
				return err == nil && rec.State == jobstate.Done
			})
			s.queueCopy(env)
			lbl := map[string]string{"tenant": tenant}
			testenv.WaitFor(t, 20*time.Second, "the copy skipped", func() bool {
				return testenv.MetricValue(t, reg, "sluice_jobs_duplicate_skipped_total", lbl) == 1
			})
			if got := s.deliveries("j1"); len(got) != 1 {
				t.Errorf("j1 delivered %d times (attempts %v), want once", len(got), got)
			}
			rec, err := jobstate.Get(ctx, s.rdb, tenant, "j1")
			if err != nil || rec.State != jobstate.Done || rec.Attempt != 1 {
				t.Errorf("j1 after the copy: %+v, %v; want done, attempt 1", rec, err)
			}
			testenv.WaitFor(t, 10*time.Second, "backlog 0", func() bool {
				n, _ := s.rdb.Get(ctx, keys.Backlog(tenant)).Int64()
				return n == 0
			})

			again := env
			again.EnqueuedAt = at.Add(time.Second)
			s.enqueue(again)
			testenv.WaitFor(t, 20*time.Second, "j1 under a new enqueued_at delivered", func() bool {
				return len(s.deliveries("j1")) == 2
			})
			if n := testenv.MetricValue(t, reg, "sluice_jobs_duplicate_skipped_total", lbl); n != 1 {
				t.Errorf("%v copies skipped, want 1 (the new job is not a copy)", n)
			}
		})
	}
}

// TestAttemptCountsEveryStart: a job whose first delivery is cut short (its
// drainer stops mid-delivery, so the delivery ends without an ack and the
// job goes back) carries Sluice-Attempt 2 on its next start, on another
// drainer, and the job's state agrees (GET /v1/jobs/{id}'s attempts).
func TestAttemptCountsEveryStart(t *testing.T) {
	t.Parallel()
	for _, name := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tenant := testenv.Name(t, "att")
			s := newStack(t, name, tenant, config.Outflow{})
			started := make(chan struct{}, 1)
			s.hold = func(ctx context.Context, job queue.Envelope) error {
				select {
				case started <- struct{}{}:
				default:
				}
				<-ctx.Done() // cut short: the drainer stops
				return ctx.Err()
			}
			stop := s.start(prometheus.NewRegistry())
			s.enqueue(queue.Envelope{Version: queue.EnvelopeVersion, ID: "a1", Tenant: tenant, Type: "mail", Cost: 1,
				Payload: []byte(`{}`), EnqueuedAt: time.Now().UTC()})
			select {
			case <-started:
			case <-time.After(20 * time.Second):
				t.Fatal("the first delivery did not start")
			}
			stop()
			s.mu.Lock()
			s.hold = nil
			s.mu.Unlock()
			s.start(prometheus.NewRegistry())
			testenv.WaitFor(t, 30*time.Second, "a second delivery", func() bool { return len(s.deliveries("a1")) >= 2 })
			got := s.deliveries("a1")
			if got[0] != 1 || got[1] != 2 {
				t.Errorf("Sluice-Attempt of the deliveries = %v, want [1 2 ...]", got)
			}
			testenv.WaitFor(t, 10*time.Second, "a1 done", func() bool {
				rec, err := jobstate.Get(context.Background(), s.rdb, tenant, "a1")
				return err == nil && rec.State == jobstate.Done
			})
			if rec, _ := jobstate.Get(context.Background(), s.rdb, tenant, "a1"); rec.Attempt != got[len(got)-1] {
				t.Errorf("recorded attempt %d, want the last Sluice-Attempt %d", rec.Attempt, got[len(got)-1])
			}
		})
	}
}
