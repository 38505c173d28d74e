package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// testHeartbeat: a claim reads a heartbeat job's last beat (the state's
// beat_at, else its enqueued_at) and the backend's time, so
// Claimed.HeartbeatLapsed tells a job whose submitter stopped polling
// (lapsed), one that polled (beat_at recent) and one enqueued just now; an
// ordinary job never lapses. Finishing the lapsed one as dropped with
// Reason heartbeat records expired with that reason and moves the
// dispatched sequence past it (the jobs behind it move up).
func testHeartbeat(t *testing.T, nb NewBackend) {
	tenant := testenv.Name(t, "beat")
	b := nb(t, tenant)
	ctx := context.Background()
	old := time.Now().Add(-10 * time.Second)
	beat := func(id string, ms int64, at time.Time) queue.Envelope {
		j := Job(tenant, id, 1)
		j.HeartbeatMS, j.EnqueuedAt = ms, at
		return j
	}
	jobs := []queue.Envelope{beat("lapsed", 1000, old), beat("polled", 1000, old), beat("fresh", 60_000, time.Now()), beat("plain", 0, old)}
	if err := b.Producer.Enqueue(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if err := b.Redis.HSet(ctx, keys.JobState(tenant, "polled"), "beat_at", time.Now().UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"lapsed": true, "polled": false, "fresh": false, "plain": false}
	for range jobs {
		j := claim(t, b.Consumer, tenant)
		id := j.Envelope.ID
		if got := j.HeartbeatLapsed(); got != want[id] {
			t.Errorf("%s: HeartbeatLapsed = %v (beat %v, now %v), want %v", id, got, j.BeatAt, j.Now, want[id])
		}
		if id != "plain" && (j.Now.IsZero() || j.BeatAt.IsZero()) {
			t.Errorf("%s: claim read beat %v at %v, want both set", id, j.BeatAt, j.Now)
		}
		out := queue.Outcome{}
		if id == "lapsed" {
			out = queue.Outcome{Dropped: jobstate.Expired, Reason: queue.ReasonHeartbeat}
		}
		finish(t, b.Consumer, j, out)
	}
	r := state(t, b, tenant, "lapsed")
	if r.State != jobstate.Expired || r.Reason != queue.ReasonHeartbeat {
		t.Errorf("lapsed: state %q reason %q, want expired, heartbeat", r.State, r.Reason)
	}
	gone, err := b.Redis.Get(ctx, keys.JobsDispatched(tenant)).Int64()
	if err != nil || gone < r.Seq {
		t.Errorf("dispatched sequence %d (%v), want >= the dropped job's seq %d", gone, err, r.Seq)
	}
}
