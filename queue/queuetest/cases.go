package queuetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// testClaimInOrder: a tenant's jobs are handed out in the order they were
// enqueued, decoded, each with its own token; then there is none.
func testClaimInOrder(t *testing.T, nb NewBackend) {
	tenant := testenv.Name(t, "order")
	b := nb(t, tenant)
	enqueue(t, b, tenant, "a", "b", "c")
	var ids, tokens []string
	for range 3 {
		j := claim(t, b.Consumer, tenant)
		if j.DecodeErr != nil || j.Envelope.Tenant != tenant || j.Envelope.Cost != 2 || j.Cancelled {
			t.Errorf("claimed %+v (decode error %v), want a decoded job of %s, cost 2, not cancelled", j.Envelope, j.DecodeErr, tenant)
		}
		ids, tokens = append(ids, j.Envelope.ID), append(tokens, j.Token())
	}
	if !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Errorf("claimed %v, want [a b c]", ids)
	}
	if slices.Contains(tokens, "") || len(slices.Compact(slices.Sorted(slices.Values(tokens)))) != 3 {
		t.Errorf("tokens %q, want three distinct non-empty ones", tokens)
	}
	claimNone(t, b.Consumer, tenant, 300*time.Millisecond)
}

// testFinishDone: a delivered job leaves the backlog and is recorded done;
// it is not handed out again.
func testFinishDone(t *testing.T, nb NewBackend) {
	tenant := testenv.Name(t, "done")
	b := nb(t, tenant)
	enqueue(t, b, tenant, "a")
	if n := backlog(t, b, tenant); n != 2 {
		t.Errorf("backlog after enqueue = %d, want 2", n)
	}
	j := claim(t, b.Consumer, tenant)
	finish(t, b.Consumer, j, queue.Outcome{})
	testenv.WaitFor(t, 5*time.Second, "backlog 0", func() bool { return backlog(t, b, tenant) == 0 })
	if r := state(t, b, tenant, "a"); r.State != jobstate.Done {
		t.Errorf("state %q, want done", r.State)
	}
	claimNone(t, b.Consumer, tenant, 300*time.Millisecond)
}

// testFinishDropped: a job finished unsent records the drop's reason.
func testFinishDropped(t *testing.T, nb NewBackend) {
	tenant := testenv.Name(t, "drop")
	b := nb(t, tenant)
	enqueue(t, b, tenant, "c", "e")
	finish(t, b.Consumer, claim(t, b.Consumer, tenant), queue.Outcome{Dropped: jobstate.Cancelled})
	finish(t, b.Consumer, claim(t, b.Consumer, tenant), queue.Outcome{Dropped: jobstate.Expired})
	for id, want := range map[string]string{"c": jobstate.Cancelled, "e": jobstate.Expired} {
		if r := state(t, b, tenant, id); r.State != want {
			t.Errorf("%s: state %q, want %q", id, r.State, want)
		}
	}
	testenv.WaitFor(t, 5*time.Second, "backlog 0", func() bool { return backlog(t, b, tenant) == 0 })
	if dl := b.DeadLetters(t, tenant); len(dl) != 0 {
		t.Errorf("dropped jobs left %d dead letters, want none", len(dl))
	}
}

// testFinishDead: a dead job leaves its record (with the job) in the
// dead-letter queue, and its state is dead with the record's reason.
func testFinishDead(t *testing.T, nb NewBackend) {
	tenant := testenv.Name(t, "dead")
	b := nb(t, tenant)
	enqueue(t, b, tenant, "x")
	j := claim(t, b.Consumer, tenant)
	dead := &queue.DeadLetter{Reason: "rejected", Error: "422 Unprocessable Entity", Status: 422, Attempts: 1, At: time.Now().UTC()}
	finish(t, b.Consumer, j, queue.Outcome{Dead: dead})
	dl := b.DeadLetters(t, tenant)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	got, err := queue.Decode(dl[0].Job)
	if dl[0].Reason != "rejected" || dl[0].Status != 422 || err != nil || got.ID != "x" {
		t.Errorf("dead letter %+v (job %v), want reason rejected, status 422 and job x", dl[0], err)
	}
	// The operator's copy, the same on every backend (package dlq): the
	// tenant's dead index, scored by when the job died, and its record.
	ctx := context.Background()
	idx, err := b.Redis.ZRangeWithScores(ctx, keys.JobIndex(tenant, "dead"), 0, -1).Result()
	if err != nil || len(idx) != 1 || idx[0].Member != "x" || int64(idx[0].Score) != dead.At.UnixMilli() {
		t.Errorf("dead index %v (%v), want x scored %d", idx, err, dead.At.UnixMilli())
	}
	if recs, err := dlq.Letters(ctx, b.Redis, tenant); err != nil || len(recs) != 1 || recs[0].Reason != "rejected" || recs[0].Status != 422 {
		t.Errorf("dead records %+v (%v), want x's, rejected with status 422", recs, err)
	}
	r := state(t, b, tenant, "x")
	if r.State != jobstate.Dead || r.Reason != "rejected" || r.LastError != dead.Error {
		t.Errorf("state %q reason %q last_error %q, want dead, rejected, %q", r.State, r.Reason, r.LastError, dead.Error)
	}
	testenv.WaitFor(t, 5*time.Second, "backlog 0", func() bool { return backlog(t, b, tenant) == 0 })
}

// testDefer: a deferred job is not handed out before its delay, the
// tenant's other jobs go on meanwhile, and it comes back as Next; its state
// is retrying with the last error until then.
func testDefer(t *testing.T, nb NewBackend) {
	tenant := testenv.Name(t, "defer")
	b := nb(t, tenant)
	enqueue(t, b, tenant, "a", "b")
	a := claim(t, b.Consumer, tenant)
	next := a.Envelope
	next.Attempt = 1
	const delay = 800 * time.Millisecond
	deferred := time.Now()
	if err := b.Consumer.Defer(context.Background(), a, queue.Retry{Delay: delay, Next: next, LastError: "downstream answered 500"}); err != nil {
		t.Fatal(err)
	}
	if r := state(t, b, tenant, "a"); r.State != jobstate.Retrying || r.LastError != "downstream answered 500" {
		t.Errorf("state %q last_error %q, want retrying with the error", r.State, r.LastError)
	}
	if j := claim(t, b.Consumer, tenant); j.Envelope.ID != "b" {
		t.Fatalf("claimed %s while a waits, want b", j.Envelope.ID)
	} else {
		finish(t, b.Consumer, j, queue.Outcome{})
	}
	claimNone(t, b.Consumer, tenant, delay/2)
	again := claim(t, b.Consumer, tenant)
	if waited := time.Since(deferred); waited < delay {
		t.Errorf("deferred job handed out after %v, want at least %v", waited, delay)
	}
	if again.Envelope.ID != "a" || again.Envelope.Attempt != 1 {
		t.Errorf("claimed %s attempt %d, want a attempt 1", again.Envelope.ID, again.Envelope.Attempt)
	}
	finish(t, b.Consumer, again, queue.Outcome{})
}

// testRelease: a released job is handed out again at once, unchanged and
// first.
func testRelease(t *testing.T, nb NewBackend) {
	tenant := testenv.Name(t, "release")
	b := nb(t, tenant)
	enqueue(t, b, tenant, "a", "b")
	a := claim(t, b.Consumer, tenant)
	if err := b.Consumer.Release(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	again := claim(t, b.Consumer, tenant)
	if again.Envelope.ID != "a" || again.Envelope.Attempt != 0 || again.Token() == a.Token() {
		t.Errorf("claimed %s attempt %d token %q after release, want a attempt 0 with a new token", again.Envelope.ID, again.Envelope.Attempt, again.Token())
	}
	if err := b.Consumer.Release(context.Background(), a); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("second release of the first claim = %v, want ErrLeaseLost", err)
	}
}

// testExtend: jobs held are not reported lost, and a settled one is.
func testExtend(t *testing.T, nb NewBackend) {
	tenant := testenv.Name(t, "extend")
	b := nb(t, tenant)
	enqueue(t, b, tenant, "a", "b")
	a, bj := claim(t, b.Consumer, tenant), claim(t, b.Consumer, tenant)
	lost, err := b.Consumer.Extend(context.Background(), tenant, []*queue.Claimed{a, bj})
	if err != nil || len(lost) != 0 {
		t.Fatalf("Extend of held jobs = %v, %v; want none lost", lost, err)
	}
	finish(t, b.Consumer, bj, queue.Outcome{})
	lost, err = b.Consumer.Extend(context.Background(), tenant, []*queue.Claimed{a, bj})
	if err != nil || len(lost) != 1 || lost[0] != bj {
		t.Errorf("Extend after b was finished = %v, %v; want b lost", lost, err)
	}
}

// testRedelivery: a consumer that dies holding a job loses its claim (its
// Finish, Defer and Release are ErrLeaseLost, Extend reports it lost) and
// the job is handed out again by the next consumer.
func testRedelivery(t *testing.T, nb NewBackend) {
	tenant := testenv.Name(t, "redeliver")
	b := nb(t, tenant)
	enqueue(t, b, tenant, "a")
	old := b.Consumer
	a := claim(t, old, tenant)
	next := b.Redeliver(t)
	again := claim(t, next, tenant)
	if again.Envelope.ID != "a" {
		t.Fatalf("redelivered %s, want a", again.Envelope.ID)
	}
	if lost, err := old.Extend(context.Background(), tenant, []*queue.Claimed{a}); err != nil || len(lost) != 1 {
		t.Errorf("old consumer's Extend = %v, %v; want a lost", lost, err)
	}
	if err := old.Finish(context.Background(), a, queue.Outcome{}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("old consumer's Finish = %v, want ErrLeaseLost", err)
	}
	if err := old.Defer(context.Background(), a, queue.Retry{Next: a.Envelope}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("old consumer's Defer = %v, want ErrLeaseLost", err)
	}
	finish(t, next, again, queue.Outcome{})
	testenv.WaitFor(t, 5*time.Second, "backlog 0", func() bool { return backlog(t, b, tenant) == 0 })
}

// testCancelled: a job cancelled while queued is handed out flagged
// Cancelled; the others are not.
func testCancelled(t *testing.T, nb NewBackend) {
	tenant := testenv.Name(t, "cancel")
	b := nb(t, tenant)
	enqueue(t, b, tenant, "keep", "gone")
	if err := jobstate.Cancel(context.Background(), b.Redis, tenant, "gone"); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 2 {
		j := claim(t, b.Consumer, tenant)
		got[j.Envelope.ID] = j.Cancelled
		finish(t, b.Consumer, j, queue.Outcome{})
	}
	if got["gone"] != true || got["keep"] != false || len(got) != 2 {
		t.Errorf("cancelled flags %v, want gone cancelled and keep not", got)
	}
}
