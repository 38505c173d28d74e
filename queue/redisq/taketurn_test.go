package redisq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

func (e *takeEnv) takeTurn(rate, capacity float64) ([]*queue.Claimed, queue.Turn) {
	e.t.Helper()
	jobs, turn, _, err := e.cons.TakeTurn(context.Background(), e.tenant, 1, rate, capacity, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return jobs, turn
}

// TestTakeTurnPassesTheBucket: a shaped tenant's take starts a job only
// with its turn from the shared bucket, one job per call; with the bucket
// full it pops nothing and answers the wait the bucket script would; a job
// whose cost does not fit yet goes back to the head; one that can never
// pass comes unstarted, having taken no turn; an override's rate is used.
func TestTakeTurnPassesTheBucket(t *testing.T) {
	t.Parallel()
	e := newTakeEnv(t)
	ctx := context.Background()
	e.enqueue(queue.Envelope{ID: "a"}, queue.Envelope{ID: "b"}, queue.Envelope{ID: "c"})
	for _, id := range []string{"a", "b"} {
		jobs, turn := e.takeTurn(0.5, 2)
		if len(jobs) != 1 || jobs[0].Envelope.ID != id || jobs[0].Started != 1 || turn.Wait != 0 {
			t.Fatalf("take %s: %v started %v, turn %+v", id, ids(jobs), started(jobs), turn)
		}
	}
	jobs, turn := e.takeTurn(0.5, 2)
	if len(jobs) != 0 || turn.Wait < time.Second || turn.Wait > 2*time.Second || turn.Water < 1.9 || turn.Rate != 0.5 {
		t.Fatalf("full bucket: %v, turn %+v; want none, a wait of about 2 s, water 2", ids(jobs), turn)
	}
	if q := e.rdb.LLen(ctx, keys.Queue(e.tenant)).Val(); q != 1 {
		t.Errorf("queue holds %d jobs after a refused take, want 1", q)
	}
	// An override of 1000/s empties the bucket at once.
	e.rdb.HSet(ctx, keys.Override(e.tenant), "outflow_rate", "1000")
	time.Sleep(5 * time.Millisecond)
	if jobs, turn := e.takeTurn(0.5, 2); len(jobs) != 1 || jobs[0].Envelope.ID != "c" || turn.Rate != 1000 {
		t.Errorf("with the override: %v, turn %+v; want c at rate 1000", ids(jobs), turn)
	}
	e.rdb.Del(ctx, keys.Override(e.tenant))

	// Costs: 3 can never pass a capacity of 2; 2 waits behind a water of 1.
	big := queue.Envelope{ID: "big"}
	e.enqueue(big)
	e.rdb.HSet(ctx, keys.JobState(e.tenant, "big"), "cost", 3)
	jobs, turn = e.takeTurn(0.5, 2)
	if len(jobs) != 1 || jobs[0].Started != 0 {
		t.Fatalf("cost over capacity: %v started %v, want big unstarted", ids(jobs), started(jobs))
	}
	e.rdb.Del(ctx, keys.Water(e.tenant))
	e.enqueue(queue.Envelope{ID: "one"}, queue.Envelope{ID: "two"})
	e.rdb.HSet(ctx, keys.JobState(e.tenant, "two"), "cost", 2)
	if jobs, _ := e.takeTurn(0.5, 2); len(jobs) != 1 || jobs[0].Envelope.ID != "one" || jobs[0].Started != 1 {
		t.Fatalf("take one: %v", ids(jobs))
	}
	jobs, turn = e.takeTurn(0.5, 2)
	if len(jobs) != 0 || turn.Wait < 1500*time.Millisecond {
		t.Fatalf("cost 2 behind water 1: %v, turn %+v; want none and a wait of about 2 s", ids(jobs), turn)
	}
	if head := e.rdb.LIndex(ctx, keys.Queue(e.tenant), 0).Val(); head == "" || consID(t, head) != "two" {
		t.Errorf("head after the refused cost-2 job: %q, want two", head)
	}
	// The refused job was the only one queued: its LPOP deleted the list,
	// and the list it went back to has a TTL.
	if ttl := e.rdb.PTTL(ctx, keys.Queue(e.tenant)).Val(); ttl <= 0 {
		t.Errorf("queue TTL after the refused job went back: %v, want one", ttl)
	}
	if n := e.rdb.ZCard(ctx, keys.Processing(e.tenant)).Val(); n != 5 {
		t.Errorf("leases %d, want 5 (a, b, c, big, one)", n)
	}
	if _, _, _, err := e.cons.TakeTurn(ctx, e.tenant, 1, 0, 2, 0); err == nil {
		t.Error("TakeTurn with rate 0: nil error, want one")
	}
}

// TestTakeTurnGrantsAhead: a turn due within ahead is granted now with the
// delay before its send, and its cost is in the bucket at once, so the next
// ask waits for the turn after it.
func TestTakeTurnGrantsAhead(t *testing.T) {
	t.Parallel()
	e := newTakeEnv(t)
	ctx := context.Background()
	e.enqueue(queue.Envelope{ID: "a"}, queue.Envelope{ID: "b"}, queue.Envelope{ID: "c"})
	take := func(ahead time.Duration) ([]*queue.Claimed, queue.Turn) {
		jobs, turn, _, err := e.cons.TakeTurn(ctx, e.tenant, 1, 10, 1, ahead)
		if err != nil {
			t.Fatal(err)
		}
		return jobs, turn
	}
	if jobs, turn := take(200 * time.Millisecond); len(jobs) != 1 || jobs[0].SendDelay != 0 {
		t.Fatalf("first: %v, %+v; want a at once", ids(jobs), turn)
	}
	jobs, turn := take(200 * time.Millisecond)
	// Its turn comes 100 ms after the first, less the time between the
	// two calls; its cost is in the bucket now, above the capacity.
	if len(jobs) != 1 || jobs[0].Envelope.ID != "b" || jobs[0].Started != 1 || jobs[0].SendDelay <= 0 || jobs[0].SendDelay > 100*time.Millisecond || turn.Water <= 1 {
		t.Fatalf("second: %v, %+v; want b granted up to 100 ms ahead, water above 1", ids(jobs), turn)
	}
	second := jobs[0].SendDelay
	jobs, turn = take(0)
	if len(jobs) != 0 || turn.Wait <= second || turn.Wait > second+100*time.Millisecond {
		t.Fatalf("third without ahead: %v, %+v; want none and a wait of about 100 ms past the second's turn", ids(jobs), turn)
	}
	if _, _, _, err := e.cons.TakeTurn(ctx, e.tenant, 1, 10, 1, 2*time.Second); err == nil {
		t.Error("ahead 2 s: nil error, want one (over queue.TurnAheadMax)")
	}
}

func consID(t *testing.T, raw string) string {
	t.Helper()
	env, err := queue.Decode([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return env.ID
}

// TestRedisTakeTurnHopCommands counts a shaped tenant's take: granted (the
// claim, the turn and the start in one call; 11 + 6 + 13 in three before),
// refused (nothing popped), and four turns granted in one call (lever L15).
func TestRedisTakeTurnHopCommands(t *testing.T) {
	h := newHopCounter(t)
	ctx := context.Background()
	tenant := "taketurnhops"
	prod, err := redisq.NewProducer(redisq.ProducerConfig{Redis: h.rdb})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := redisq.NewConsumer(redisq.ConsumerConfig{Redis: h.rdb})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"w", "x", "y"} {
		if err := prod.Enqueue(ctx, []queue.Envelope{{ID: id, Tenant: tenant, Type: "t", Cost: 1, EnqueuedAt: time.Now().UTC()}}); err != nil {
			t.Fatal(err)
		}
		name := []string{"warm", "take turn granted", "take turn refused"}[i]
		h.hop(name, func() {
			jobs, turn, _, err := cons.TakeTurn(ctx, tenant, 1, 0.001, 2, 0)
			if err != nil || (len(jobs) == 1) != (i < 2) {
				t.Fatalf("%s: %v %+v %v", name, started(jobs), turn, err)
			}
		})
	}
	// A batch: four turns in one call (the tenant's keys made by the first).
	batch := "taketurnhops4"
	envs := make([]queue.Envelope, 8)
	for i := range envs {
		envs[i] = queue.Envelope{ID: fmt.Sprintf("b%d", i), Tenant: batch, Type: "t", Cost: 1, EnqueuedAt: time.Now().UTC()}
	}
	if err := prod.Enqueue(ctx, envs); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"warm 4", "take 4 turns granted"} {
		h.hop(name, func() {
			jobs, turn, _, err := cons.TakeTurn(ctx, batch, 4, 1000, 100, 0)
			if err != nil || len(jobs) != 4 {
				t.Fatalf("%s: %v %+v %v", name, started(jobs), turn, err)
			}
		})
	}
	// 4 turns in one call, 7.5 commands a job: the call's own 18 (the
	// queued index's ZREM for all the started jobs included) and 3 per job
	// (its state read, state write and its TTL); the single
	// turn above is 18 + 4, its water's PEXPIRE included (at 0.001/s the
	// recorded expiry never covers the next store). Of the call's own, 3
	// count the started jobs' outflow (HINCRBY, PEXPIRE, HLEN), which saves
	// the drainer's flush call of the tenant's second.
	want := map[string]int64{"take turn granted": 22, "take turn refused": 4, "take 4 turns granted": 30}
	for k, w := range want {
		if h.got[k] != w {
			t.Errorf("%s: %d commands, want %d", k, h.got[k], w)
		}
	}
}
