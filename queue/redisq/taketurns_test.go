package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// TestTakeTurnBatchesTurnsAhead: one TakeTurn of k jobs grants, in queue
// order, every turn due within ahead, each with its own send delay (so each
// send is on time) and all their costs in the bucket at once; the first job
// whose turn falls later goes back to the head with the jobs after it, so
// the next call starts from it and waits for its turn. The answer tells
// when that turn falls due (Turn.Next), so the drainer need not ask before.
func TestTakeTurnBatchesTurnsAhead(t *testing.T) {
	t.Parallel()
	e := newTakeEnv(t)
	ctx := context.Background()
	e.enqueue(queue.Envelope{ID: "a"}, queue.Envelope{ID: "b"}, queue.Envelope{ID: "c"}, queue.Envelope{ID: "d"}, queue.Envelope{ID: "e"})
	// 10/s, capacity 1: a now, b at +100 ms, c at +200 ms; d at +300 ms is
	// past ahead.
	jobs, turn, _, err := e.cons.TakeTurn(ctx, e.tenant, 5, 10, 1, 250*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(jobs); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("take of 5 with 250 ms ahead: %v, want a b c", got)
	}
	for i, j := range jobs {
		want := time.Duration(i) * 100 * time.Millisecond
		if j.Started != 1 || !j.InLease || j.SendDelay > want || j.SendDelay < want-20*time.Millisecond {
			t.Errorf("%s: started %d, in lease %v, delay %v; want started, delay about %v", j.Envelope.ID, j.Started, j.InLease, j.SendDelay, want)
		}
	}
	if turn.Wait != 0 || turn.Water < 2.9 || turn.Water > 3 {
		t.Errorf("turn %+v, want no wait and water about 3 (all three costs in)", turn)
	}
	if turn.Next < 250*time.Millisecond || turn.Next > 300*time.Millisecond {
		t.Errorf("turn %+v: next turn in %v, want about 300 ms (d's turn, after the three granted)", turn, turn.Next)
	}
	if q := e.rdb.LRange(ctx, keys.Queue(e.tenant), 0, -1).Val(); len(q) != 2 || consID(t, q[0]) != "d" || consID(t, q[1]) != "e" {
		t.Fatalf("queue after the take: %d jobs, want d e in order", len(q))
	}
	if n := e.rdb.ZCard(ctx, keys.JobIndex(e.tenant, "in_flight")).Val(); n != 3 {
		t.Errorf("in_flight index holds %d, want 3", n)
	}
	jobs, turn, _, err = e.cons.TakeTurn(ctx, e.tenant, 5, 10, 1, 0)
	if err != nil || len(jobs) != 0 || turn.Wait < 250*time.Millisecond || turn.Wait > 300*time.Millisecond {
		t.Fatalf("next take, no ahead: %v, %+v, %v; want none and a wait of about 300 ms (d's turn)", ids(jobs), turn, err)
	}
}

// TestTakeTurnBatchStopsAtAnUnplainJob: a job the take cannot start (here
// one with a deadline) ends a batch of turns: it goes back to the head with
// the rest, unleased and having taken no turn, and the next take hands it
// out alone, unstarted, for the drainer's own checks.
func TestTakeTurnBatchStopsAtAnUnplainJob(t *testing.T) {
	t.Parallel()
	e := newTakeEnv(t)
	ctx := context.Background()
	deadline := time.Now().Add(time.Hour).UTC()
	e.enqueue(queue.Envelope{ID: "a"}, queue.Envelope{ID: "late", Deadline: &deadline}, queue.Envelope{ID: "b"})
	jobs, turn, _, err := e.cons.TakeTurn(ctx, e.tenant, 3, 1000, 10, 0)
	if err != nil || len(jobs) != 1 || jobs[0].Envelope.ID != "a" || jobs[0].Started != 1 {
		t.Fatalf("first take: %v started %v, %v; want a alone, started", ids(jobs), started(jobs), err)
	}
	if turn.Water < 0.99 || turn.Water > 1 {
		t.Errorf("water %v after one turn, want 1", turn.Water)
	}
	if n := e.rdb.ZCard(ctx, keys.Processing(e.tenant)).Val(); n != 1 {
		t.Errorf("leases %d, want 1 (late went back unleased)", n)
	}
	jobs, _, _, err = e.cons.TakeTurn(ctx, e.tenant, 3, 1000, 10, 0)
	if err != nil || len(jobs) != 1 || jobs[0].Envelope.ID != "late" || jobs[0].Started != 0 || jobs[0].SendDelay != 0 {
		t.Fatalf("second take: %v started %v, %v; want late alone, unstarted", ids(jobs), started(jobs), err)
	}
	jobs, _, _, err = e.cons.TakeTurn(ctx, e.tenant, 3, 1000, 10, 0)
	if err != nil || len(jobs) != 1 || jobs[0].Envelope.ID != "b" || jobs[0].Started != 1 {
		t.Fatalf("third take: %v started %v, %v; want b, started", ids(jobs), started(jobs), err)
	}
}
