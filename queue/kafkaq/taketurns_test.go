package kafkaq_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// takeK is one TakeTurn of up to k jobs, asked again while it finds no job
// yet and answers no wait (the consumer still fetching), for up to 20 s.
func (te *turnEnv) takeK(k int, rate, capacity float64, ahead time.Duration) ([]*queue.Claimed, queue.Turn) {
	te.t.Helper()
	for end := time.Now().Add(20 * time.Second); ; {
		jobs, turn, wait, err := te.c.TakeTurn(context.Background(), te.tenant, k, rate, capacity, ahead)
		if err != nil || wait != 0 {
			te.t.Fatalf("TakeTurn: wait %v, %v; want 0, nil", wait, err)
		}
		if len(jobs) > 0 || turn.Wait > 0 {
			return jobs, turn
		}
		if time.Now().After(end) {
			te.t.Fatal("TakeTurn found no job in 20 s")
		}
	}
}

// TestKafkaTakeTurnBatchesTurnsAhead: one TakeTurn of k jobs grants, in
// queue order, every turn due within ahead, each with its own send delay
// and all their costs in the bucket at once; the first job whose turn falls
// later goes back to the head with the jobs after it, so the next call
// starts from it and waits for its turn (the Redis backend's
// TestTakeTurnBatchesTurnsAhead).
func TestKafkaTakeTurnBatchesTurnsAhead(t *testing.T) {
	t.Parallel()
	te := newTurnEnv(t, queue.Envelope{ID: "a"}, queue.Envelope{ID: "b"}, queue.Envelope{ID: "c"}, queue.Envelope{ID: "d"}, queue.Envelope{ID: "e"})
	// 10/s, capacity 1: a now, b at +100 ms, c at +200 ms; d at +300 ms is
	// past ahead.
	jobs, turn := te.takeK(5, 10, 1, 250*time.Millisecond)
	if got := turnIDs(jobs); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("take of 5 with 250 ms ahead: %v, want a b c", got)
	}
	for i, j := range jobs {
		want := time.Duration(i) * 100 * time.Millisecond
		if j.Started != 1 || j.SendDelay > want || j.SendDelay < want-20*time.Millisecond {
			t.Errorf("%s: started %d, delay %v; want started, delay about %v", j.Envelope.ID, j.Started, j.SendDelay, want)
		}
	}
	if turn.Wait != 0 || turn.Water < 2.9 || turn.Water > 3 {
		t.Errorf("turn %+v, want no wait and water about 3 (all three costs in)", turn)
	}
	jobs, turn = te.takeK(5, 10, 1, 0)
	if len(jobs) != 0 || turn.Wait < 250*time.Millisecond || turn.Wait > 300*time.Millisecond {
		t.Fatalf("next take, no ahead: %v, %+v; want none and a wait of about 300 ms (d's turn)", turnIDs(jobs), turn)
	}
	time.Sleep(turn.Wait)
	if jobs, _ = te.takeK(5, 10, 1, 150*time.Millisecond); len(jobs) != 2 || jobs[0].Envelope.ID != "d" || jobs[1].Envelope.ID != "e" {
		t.Fatalf("after the wait: %v, want d e in order", turnIDs(jobs))
	}
}

// TestKafkaTakeTurnBatchStopsAtAnUnplainJob: a job the take cannot start
// (here one with a deadline) ends a batch of turns: it goes back to the
// head with the rest, having taken no turn, and the next take hands it out
// alone, unstarted, for the drainer's own checks; a job of another cost
// ends a batch the same way.
func TestKafkaTakeTurnBatchStopsAtAnUnplainJob(t *testing.T) {
	t.Parallel()
	soon := time.Now().Add(time.Hour).UTC()
	te := newTurnEnv(t, queue.Envelope{ID: "a"}, queue.Envelope{ID: "deadline", Deadline: &soon},
		queue.Envelope{ID: "b"}, queue.Envelope{ID: "c", Cost: 2}, queue.Envelope{ID: "d", Cost: 2})
	if jobs, _ := te.takeK(5, 1000, 10, 100*time.Millisecond); len(jobs) != 1 || jobs[0].Envelope.ID != "a" || jobs[0].Started != 1 {
		t.Fatalf("first take: %v, want a alone, started", turnIDs(jobs))
	}
	if jobs, _ := te.takeK(5, 1000, 10, 100*time.Millisecond); len(jobs) != 1 || jobs[0].Envelope.ID != "deadline" || jobs[0].Started != 0 {
		t.Fatalf("second take: %v, want the deadline job alone, unstarted", turnIDs(jobs))
	}
	if jobs, _ := te.takeK(5, 1000, 10, 100*time.Millisecond); len(jobs) != 1 || jobs[0].Envelope.ID != "b" {
		t.Fatalf("third take: %v, want b alone (c costs 2)", turnIDs(jobs))
	}
	jobs, _ := te.takeK(5, 1000, 10, 100*time.Millisecond)
	if len(jobs) != 2 || jobs[0].Envelope.ID != "c" || jobs[1].Envelope.ID != "d" || jobs[0].Started != 1 || jobs[1].Started != 1 {
		t.Fatalf("fourth take: %v, want c d started (one cost)", turnIDs(jobs))
	}
}
