package drainer_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/scheduler"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// dueSlack is how late after its due time a scheduled job of a tenant with
// no backlog may be delivered: the scheduler's interval (200ms), the move
// and a claim (the move wakes the lane from its idle poll).
const dueSlack = time.Second

// skew allows for Redis TIME (the due check) and the test's clock being
// read at different instants on one host.
const skew = 10 * time.Millisecond

// TestScheduledJobDeliveredWhenDue, on both backends: a scheduled job is
// not delivered before its due time and is within dueSlack after it; while
// it waits it holds up no other job of its tenant (one enqueued after it is
// delivered at once), is in no backlog and takes no outflow turn (the
// bucket's water level counts only the other job), and its state is
// scheduled; once delivered it has left the scheduled index and hash.
func TestScheduledJobDeliveredWhenDue(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			t.Parallel()
			tenant := testenv.Name(t, "sched")
			s := newStack(t, be, tenant, slowOutflow)
			ctx := context.Background()
			due := time.Now().Add(3 * time.Second)
			s.schedule("later", due)
			s.enqueue(queue.Envelope{ID: "now", Tenant: tenant, Type: "mail", Cost: 1, Payload: []byte(`{}`)})
			s.start(prometheus.NewRegistry())

			testenv.WaitFor(t, 2500*time.Millisecond, "the ordinary job delivered before the scheduled one is due",
				func() bool { return !s.deliveredAt("now").IsZero() })
			// The backlog falls in the finish call, which also records the
			// job done (ack.lua, kafka_finish.lua) and runs after the
			// delivery returns: wait for that state, not the arrival.
			testenv.WaitFor(t, 2*time.Second, "the ordinary job's finish recorded", func() bool {
				r, _ := jobstate.Get(ctx, s.rdb, tenant, "now")
				return r.State == jobstate.Done
			})
			if r, err := jobstate.Get(ctx, s.rdb, tenant, "later"); err != nil || r.State != "scheduled" {
				t.Errorf("scheduled job before due: state %q (%v), want scheduled", r.State, err)
			}
			if w := s.water(); w != 1 {
				t.Errorf("water level %d before the scheduled job is due, want 1 (only the ordinary job's turn)", w)
			}
			if n, _ := s.rdb.Get(ctx, keys.Backlog(tenant)).Int64(); n != 0 {
				t.Errorf("backlog %d while only a scheduled job waits, want 0", n)
			}
			testenv.WaitFor(t, time.Until(due)+dueSlack, "the scheduled job delivered", func() bool { return !s.deliveredAt("later").IsZero() })
			at := s.deliveredAt("later")
			if at.Before(due.Add(-skew)) || at.After(due.Add(dueSlack)) {
				t.Errorf("scheduled job delivered %v after its due time, want 0..%v", at.Sub(due), dueSlack)
			}
			testenv.WaitFor(t, 2*time.Second, "state done", func() bool {
				r, _ := jobstate.Get(ctx, s.rdb, tenant, "later")
				return r.State == jobstate.Done
			})
			if n, _ := s.rdb.ZCard(ctx, keys.JobIndex(tenant, "scheduled")).Result(); n != 0 {
				t.Errorf("scheduled index holds %d after the move, want 0", n)
			}
			if n, _ := s.rdb.HLen(ctx, keys.ScheduledJobs(tenant)).Result(); n != 0 {
				t.Errorf("scheduled hash holds %d after the move, want 0", n)
			}
			if w := s.water(); w != 2 {
				t.Errorf("water level %d after both deliveries, want 2", w)
			}
		})
	}
}

// TestScheduledJobSurvivesDrainerRestart, on both backends: the drainer
// stops before the job is due and a new one starts after; the job is
// delivered by the new one, within dueSlack of its start.
func TestScheduledJobSurvivesDrainerRestart(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			t.Parallel()
			tenant := testenv.Name(t, "restart")
			s := newStack(t, be, tenant, slowOutflow)
			due := time.Now().Add(2 * time.Second)
			s.schedule("job", due)
			stop := s.start(prometheus.NewRegistry())
			time.Sleep(500 * time.Millisecond) // the first drainer runs, then dies before the due time
			stop()
			if time.Now().After(due) {
				t.Fatal("the first drainer took until the due time to stop")
			}
			time.Sleep(time.Until(due) + 500*time.Millisecond)
			if !s.deliveredAt("job").IsZero() {
				t.Fatal("delivered with no drainer running")
			}
			started := time.Now()
			s.start(prometheus.NewRegistry())
			testenv.WaitFor(t, dueSlack+3*time.Second, "delivered by the new drainer", func() bool { return !s.deliveredAt("job").IsZero() })
			if late := s.deliveredAt("job").Sub(started); be == "redis" && late > dueSlack {
				t.Errorf("delivered %v after the new drainer started, want within %v", late, dueSlack)
			}
		})
	}
}

// TestScheduledJobCancelled, on both backends: a scheduled job cancelled
// before its due time is never delivered, its state is cancelled and it
// leaves the scheduled index and hash; a second cancel is a conflict.
func TestScheduledJobCancelled(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			t.Parallel()
			tenant := testenv.Name(t, "schedcancel")
			s := newStack(t, be, tenant, slowOutflow)
			ctx := context.Background()
			due := time.Now().Add(time.Second)
			s.schedule("gone", due)
			s.schedule("kept", due)
			ok, _, err := scheduler.Cancel(ctx, s.rdb, tenant, "gone")
			if err != nil || !ok {
				t.Fatalf("Cancel = %v, %v; want cancelled", ok, err)
			}
			if ok, state, _ := scheduler.Cancel(ctx, s.rdb, tenant, "gone"); ok || state != jobstate.Cancelled {
				t.Errorf("second Cancel = %v, %q; want not scheduled, state cancelled", ok, state)
			}
			s.start(prometheus.NewRegistry())
			testenv.WaitFor(t, time.Until(due)+dueSlack, "the other job delivered", func() bool { return !s.deliveredAt("kept").IsZero() })
			time.Sleep(300 * time.Millisecond)
			if !s.deliveredAt("gone").IsZero() {
				t.Error("cancelled scheduled job delivered")
			}
			if r, _ := jobstate.Get(ctx, s.rdb, tenant, "gone"); r.State != jobstate.Cancelled {
				t.Errorf("state %q, want cancelled", r.State)
			}
			if n, _ := s.rdb.HLen(ctx, keys.ScheduledJobs(tenant)).Result(); n != 0 {
				t.Errorf("scheduled hash holds %d, want 0", n)
			}
		})
	}
}
