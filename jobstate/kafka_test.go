package jobstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
)

// TestKafkaEnqueueAfterStart: on the Kafka backend a drainer may start a
// job before the producer's post-ack pipeline records it; the record keeps
// in_flight and gains type, enqueued_at and seq. A reused id of an older,
// finished job is replaced.
func TestKafkaEnqueueAfterStart(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "js")
	ok, err := startRun(ctx, rdb, jobstate.Dispatch{Tenant: tenant, JobID: "early", Member: "early|1", Attempt: 1, Lease: time.Minute})
	if err != nil || !ok {
		t.Fatalf("Start = %v, %v", ok, err)
	}
	rdb.HSet(ctx, keys.JobState(tenant, "reused"), "state", "done", "enqueued_at", 5, "last_error", "old")
	res := jobstate.EnqueueCall(tenant, 0, []jobstate.QueuedJob{
		{ID: "early", Type: "mail", EnqueuedAt: t0},
		{ID: "reused", Type: "mail", EnqueuedAt: t0},
		{ID: "plain", Type: "sms", EnqueuedAt: t0},
	}).Run(ctx, rdb)
	v, err := res.Result()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := jobstate.EnqueueReply(v, 3); err != nil || n != 3 {
		t.Fatalf("EnqueueCall = %v, %v; want 3 (the last seq)", n, err)
	}
	want := []jobstate.Record{
		{JobID: "early", Tenant: tenant, Type: "mail", State: "in_flight", Attempt: 1, EnqueuedAt: t0, Seq: 1, Ahead: -1},
		{JobID: "reused", Tenant: tenant, Type: "mail", State: "queued", EnqueuedAt: t0, Seq: 2, Ahead: 1},
		{JobID: "plain", Tenant: tenant, Type: "sms", State: "queued", EnqueuedAt: t0, Seq: 3, Ahead: 2},
	}
	for _, w := range want {
		if diff := cmp.Diff(w, get(t, rdb, tenant, w.JobID), ignoreTimes); diff != "" {
			t.Errorf("record of %s (-want +got):\n%s", w.JobID, diff)
		}
	}
}

// TestSettleKafka records the Kafka backend's settlements: done, dead with
// the DLQ counter, retrying, expired.
func TestSettleKafka(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "js")
	ids := []string{"ok", "dead", "retry", "late"}
	var qj []jobstate.QueuedJob
	for _, id := range ids {
		qj = append(qj, jobstate.QueuedJob{ID: id, Type: "t", EnqueuedAt: t0})
	}
	if err := jobstate.EnqueueCall(tenant, 0, qj).Run(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		s     jobstate.Settle
		state string
		err   string
	}{
		{jobstate.Settle{JobID: "ok", State: jobstate.Done}, "done", ""},
		{jobstate.Settle{JobID: "dead", State: jobstate.Dead, LastError: "410 Gone", Reason: "rejected", DeadLetter: `{"reason":"rejected"}`}, "dead", "410 Gone"},
		{jobstate.Settle{JobID: "retry", State: jobstate.Retrying, LastError: "timeout"}, "retrying", "timeout"},
		{jobstate.Settle{JobID: "late", State: jobstate.Expired}, "expired", ""},
	}
	for _, tt := range tests {
		tt.s.Tenant, tt.s.Member = tenant, tt.s.JobID+"|1"
		v, err := tt.s.Call().Run(ctx, rdb).Result()
		if err == nil {
			err = jobstate.SettleReply(v)
		}
		if err != nil {
			t.Fatal(err)
		}
		r := get(t, rdb, tenant, tt.s.JobID)
		if r.State != tt.state || r.LastError != tt.err || r.Reason != tt.s.Reason {
			t.Errorf("after %+v: state %q last_error %q reason %q, want %q %q %q", tt.s, r.State, r.LastError, r.Reason, tt.state, tt.err, tt.s.Reason)
		}
	}
	if ids := rdb.ZRange(ctx, keys.JobIndex(tenant, "dead"), 0, -1).Val(); len(ids) != 1 || ids[0] != "dead" {
		t.Errorf("dead index = %v, want [dead]", ids)
	}
	if rec := rdb.HGet(ctx, keys.DeadRecords(tenant), "dead").Val(); rec != `{"reason":"rejected"}` {
		t.Errorf("dead letter = %q, want the one settled", rec)
	}
	if got, _ := rdb.Get(ctx, keys.JobsDispatched(tenant)).Int64(); got != 4 {
		t.Errorf("dispatched sequence = %d, want 4 (the expired job, seq 4, left the queue)", got)
	}
}

// TestKafkaCopyDoneBeforeEnqueueWrite: a drainer's start (Dispatch, for a
// job its take did not start: a deadline or a heartbeat) of a job the
// producer's post-ack write has not recorded yet keeps the envelope's
// enqueued_at, so once that delivery is done a copy of the job (the same
// enqueued_at) is refused as a duplicate, and a job of another
// enqueued_at under the id is not; the post-ack write landing later still
// records the job's type and seq over the done state.
func TestKafkaCopyDoneBeforeEnqueueWrite(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "js")
	d := jobstate.Dispatch{Tenant: tenant, JobID: "early", Member: "early|1", Attempt: 1, EnqueuedAt: t0, Lease: time.Minute}
	if s := startOf(t, rdb, d); !s.Deliver || s.Attempt != 1 {
		t.Fatalf("first start = %+v, want attempt 1 delivered", s)
	}
	done := jobstate.Settle{Tenant: tenant, JobID: "early", Member: "early|1", State: jobstate.Done}
	settleOf(t, rdb, done)
	d.Member = "early|2"
	if s := startOf(t, rdb, d); s.Deliver || !s.Duplicate {
		t.Errorf("a copy's start after the done, before the post-ack write = %+v, want a duplicate", s)
	}
	other := d
	other.Member, other.EnqueuedAt = "early|3", t0.Add(time.Second)
	if s := startOf(t, rdb, other); !s.Deliver {
		t.Errorf("another enqueued_at under the id = %+v, want delivered", s)
	}
	settleOf(t, rdb, jobstate.Settle{Tenant: tenant, JobID: "early", Member: "early|3", State: jobstate.Done})
	if err := jobstate.EnqueueCall(tenant, 0, []jobstate.QueuedJob{{ID: "early", Type: "mail", EnqueuedAt: other.EnqueuedAt}}).Run(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	if r := get(t, rdb, tenant, "early"); r.State != "done" || r.Type != "mail" || r.Seq != 1 || !r.EnqueuedAt.Equal(other.EnqueuedAt) {
		t.Errorf("after the late post-ack write: %+v, want done, type mail, seq 1, the envelope's enqueued_at", r)
	}
}

// TestKafkaEnqueueWriteKnowsTheLife: the post-ack write tells a state a
// drainer wrote for this very job (its start kept the envelope's
// enqueued_at) from an older life's whose own write never landed: a job
// that died before its write stays dead, with type and seq added; an older
// job done under the id (another start_enqueued_at) is replaced by the new
// one, queued, so the new job is not taken for a copy of it.
func TestKafkaEnqueueWriteKnowsTheLife(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "js")
	older := t0.Add(-time.Hour)
	for _, s := range []struct {
		id    string
		enq   time.Time
		state string
	}{{"died", t0, jobstate.Dead}, {"reused", older, jobstate.Done}} {
		d := jobstate.Dispatch{Tenant: tenant, JobID: s.id, Member: s.id + "|1", Attempt: 1, EnqueuedAt: s.enq, Lease: time.Minute}
		if ok, err := startRun(ctx, rdb, d); err != nil || !ok {
			t.Fatalf("start %s = %v, %v", s.id, ok, err)
		}
		st := jobstate.Settle{Tenant: tenant, JobID: s.id, Member: s.id + "|1", State: s.state}
		settleOf(t, rdb, st)
	}
	if err := jobstate.EnqueueCall(tenant, 0, []jobstate.QueuedJob{
		{ID: "died", Type: "mail", EnqueuedAt: t0},
		{ID: "reused", Type: "mail", EnqueuedAt: t0},
	}).Run(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	if r := get(t, rdb, tenant, "died"); r.State != "dead" || r.Type != "mail" || r.Seq != 1 || !r.EnqueuedAt.Equal(t0) {
		t.Errorf("a job dead before its post-ack write: %+v, want dead, type mail, seq 1", r)
	}
	if r := get(t, rdb, tenant, "reused"); r.State != "queued" || r.Attempt != 0 || r.Seq != 2 || !r.EnqueuedAt.Equal(t0) {
		t.Errorf("a new job under the id of an older one done before its write: %+v, want queued, attempt 0, seq 2", r)
	}
	d := jobstate.Dispatch{Tenant: tenant, JobID: "reused", Member: "reused|2", Attempt: 1, EnqueuedAt: t0, Lease: time.Minute}
	if s := startOf(t, rdb, d); !s.Deliver || s.Attempt != 1 {
		t.Errorf("start of the new job = %+v; want attempt 1 delivered", s)
	}
}

// TestKafkaCopyInAnotherPartition: a start records the partition its
// copy was read from (Dispatch.Source, start_part). While that delivery is
// in flight or waits for its retry, the start of a copy of the same job
// (the same enqueued_at) from another partition is refused as a duplicate,
// leaving the state and attempt as they were; the same partition's record handed out again (after
// a revoke or a crash) starts as the next attempt; so does a start with no
// Source (the Redis backend), and another job under the id. Once done, a
// copy from any partition is a duplicate.
func TestKafkaCopyInAnotherPartition(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "js")
	d := jobstate.Dispatch{Tenant: tenant, JobID: "c", Member: "c|1", Attempt: 1, EnqueuedAt: t0, Lease: time.Minute, Source: "0"}
	if s := startOf(t, rdb, d); !s.Deliver || s.Attempt != 1 {
		t.Fatalf("first start = %+v, want attempt 1 delivered", s)
	}
	copyOf := d
	copyOf.Member, copyOf.Source = "c|2", "1"
	if s := startOf(t, rdb, copyOf); s.Deliver || !s.Duplicate {
		t.Errorf("a copy from partition 1 while partition 0's is in flight = %+v, want a duplicate", s)
	}
	if r := get(t, rdb, tenant, "c"); r.State != jobstate.InFlight || r.Attempt != 1 {
		t.Errorf("after the refused copy: %+v, want in_flight, attempt 1 (nothing written)", r)
	}
	again := d
	again.Member = "c|3"
	if s := startOf(t, rdb, again); !s.Deliver || s.Attempt != 2 {
		t.Errorf("partition 0's record handed out again = %+v, want attempt 2 delivered", s)
	}
	retry := jobstate.Settle{Tenant: tenant, JobID: "c", Member: "c|3", State: jobstate.Retrying, LastError: "503", Due: t0.Add(time.Minute)}
	settleOf(t, rdb, retry)
	copyOf.Member = "c|4"
	if s := startOf(t, rdb, copyOf); s.Deliver || !s.Duplicate {
		t.Errorf("a copy from partition 1 while partition 0's waits for its retry = %+v, want a duplicate", s)
	}
	redisBackend := d
	redisBackend.Member, redisBackend.Source = "c|5", ""
	if s := startOf(t, rdb, redisBackend); !s.Deliver || s.Attempt != 3 {
		t.Errorf("a start with no Source = %+v, want attempt 3 delivered", s)
	}
	other := copyOf
	other.Member, other.EnqueuedAt = "c|6", t0.Add(time.Second)
	if s := startOf(t, rdb, other); !s.Deliver {
		t.Errorf("another enqueued_at under the id from partition 1 = %+v, want delivered", s)
	}
	done := jobstate.Settle{Tenant: tenant, JobID: "c", Member: "c|6", State: jobstate.Done}
	settleOf(t, rdb, done)
	for _, src := range []string{"0", "1"} {
		late := other
		late.Member, late.Source = "c|7", src
		if s := startOf(t, rdb, late); s.Deliver || !s.Duplicate {
			t.Errorf("a copy from partition %s after the done = %+v, want a duplicate", src, s)
		}
	}
}

// TestKafkaStartPartOfAnotherLife: start_part names the life that wrote it,
// so one left by another job under the id never refuses this one. A job in
// flight from partition 1 whose dead letter is redriven meanwhile (the
// redrive drops enqueued_at and start_enqueued_at; the new record's
// post-ack write adopts the hash, state and start_part kept), or started
// from an envelope without enqueued_at, leaves start_part behind; the new
// job's only copy, read from partition 0, is still delivered.
func TestKafkaStartPartOfAnotherLife(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "js")
	for _, c := range []struct {
		id    string
		first time.Time // the first job's enqueued_at; zero: not known
	}{{"redriven", t0}, {"no-enq", time.Time{}}} {
		d := jobstate.Dispatch{Tenant: tenant, JobID: c.id, Member: c.id + "|1", Attempt: 1, EnqueuedAt: c.first, Lease: time.Minute, Source: "1"}
		if s := startOf(t, rdb, d); !s.Deliver {
			t.Fatalf("%s: first start = %+v, want delivered", c.id, s)
		}
		if err := rdb.HDel(ctx, keys.JobState(tenant, c.id), "enqueued_at", "start_enqueued_at").Err(); err != nil {
			t.Fatal(err) // as dlq's redrive does
		}
		next := t0.Add(time.Hour)
		if err := jobstate.EnqueueCall(tenant, 0, []jobstate.QueuedJob{{ID: c.id, Type: "mail", EnqueuedAt: next}}).Run(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
		r := jobstate.Dispatch{Tenant: tenant, JobID: c.id, Member: c.id + "|2", Attempt: 1, EnqueuedAt: next, Lease: time.Minute, Source: "0"}
		if s := startOf(t, rdb, r); !s.Deliver {
			t.Errorf("%s: the new job's only copy, from partition 0 = %+v, want delivered", c.id, s)
		}
	}
}

// TestKafkaCopyOfDeadJob: once a job is dead (its dead letter written), a
// start of this very job (a copy, or its own record handed out again after
// a revoke) is refused as a duplicate, from any partition and by Claim's
// read; its redrive, a new life (dlq drops enqueued_at and
// start_enqueued_at first, then enqueues another enqueued_at), starts.
func TestKafkaCopyOfDeadJob(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "js")
	d := jobstate.Dispatch{Tenant: tenant, JobID: "d", Member: "d|1", Attempt: 1, EnqueuedAt: t0, Lease: time.Minute, Source: "0"}
	if s := startOf(t, rdb, d); !s.Deliver {
		t.Fatalf("first start = %+v, want delivered", s)
	}
	settleOf(t, rdb, jobstate.Settle{Tenant: tenant, JobID: "d", Member: "d|1", State: jobstate.Dead})
	for _, src := range []string{"0", "1", ""} {
		again := d
		again.Member, again.Source = "d|"+src+"x", src
		if s := startOf(t, rdb, again); s.Deliver || !s.Duplicate {
			t.Errorf("a start of the dead job from partition %q = %+v, want a duplicate", src, s)
		}
	}
	if r := get(t, rdb, tenant, "d"); r.State != jobstate.Dead {
		t.Errorf("after the refused starts: %+v, want dead", r)
	}
	if err := rdb.HDel(ctx, keys.JobState(tenant, "d"), "enqueued_at", "start_enqueued_at").Err(); err != nil {
		t.Fatal(err)
	}
	redriven := d
	redriven.Member, redriven.EnqueuedAt = "d|r", t0.Add(time.Hour)
	if s := startOf(t, rdb, redriven); !s.Deliver {
		t.Errorf("the redriven job's start = %+v, want delivered", s)
	}
}
