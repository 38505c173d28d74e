package lua

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestBacklogOwedPaidByRaise: a finish that comes before the producer's
// post-ack raise (Kafka hands a record out at its ack) finds the counter
// short; what it could not take is owed (keys.BacklogOwed, with its TTL),
// and the post-ack write (job_state_enqueue.lua's backlog_raise, here a call
// without jobs) pays the debt first, so the counter ends where the other
// order leaves it. A debt larger than one raise is paid over several;
// without a debt the raise adds the whole cost.
func TestBacklogOwedPaidByRaise(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "bo")
	bk, ok := keys.Backlog(tenant), keys.BacklogOwed(tenant)
	defer rdb.Del(ctx, bk, ok)
	ttl, okTTL := keys.BacklogTTL.Milliseconds(), keys.BacklogOwedTTL.Milliseconds()
	lower := func(cost int64) int64 {
		t.Helper()
		n, err := BacklogDecr.Run(ctx, rdb, []string{bk, "", ok}, cost, ttl, "0", okTTL).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	post := []string{keys.JobSeq(tenant), keys.JobsDispatched(tenant), bk, ok}
	raise := func(cost int64) int64 {
		t.Helper()
		if n, err := JobStateEnqueue.Run(ctx, rdb, post, time.Hour.Milliseconds(), cost, ttl).Int64(); err != nil || n != 0 {
			t.Fatalf("raise %d: %d, %v; want 0 (no jobs)", cost, n, err)
		}
		n, _ := rdb.Get(ctx, bk).Int64()
		return n
	}
	owed := func() int64 { n, _ := rdb.Get(ctx, ok).Int64(); return n }

	rdb.Set(ctx, bk, 1, time.Hour)
	if n := lower(3); n != 0 || owed() != 2 {
		t.Fatalf("lower 3 from 1: counter %d, owed %d; want 0 and 2", n, owed())
	}
	if d := rdb.PTTL(ctx, ok).Val(); d <= 0 || d > keys.BacklogOwedTTL {
		t.Errorf("owed TTL %v, want within %v", d, keys.BacklogOwedTTL)
	}
	if n := raise(1); n != 0 || owed() != 1 {
		t.Errorf("raise 1 against a debt of 2: counter %d, owed %d; want 0 and 1", n, owed())
	}
	if n := raise(4); n != 3 || rdb.Exists(ctx, ok).Val() != 0 {
		t.Errorf("raise 4 against a debt of 1: counter %d, owed key exists %d; want 3, gone", n, rdb.Exists(ctx, ok).Val())
	}
	if n := raise(2); n != 5 {
		t.Errorf("raise 2 without a debt: counter %d, want 5", n)
	}
	if d := rdb.PTTL(ctx, bk).Val(); d < keys.BacklogTTL-time.Minute {
		t.Errorf("counter TTL %v after a raise, want about %v", d, keys.BacklogTTL)
	}
	// Without an owed key (the older call) the shortfall is dropped, as before.
	if n, err := BacklogDecr.Run(ctx, rdb, []string{bk}, 9, ttl).Int64(); err != nil || n != 0 || owed() != 0 {
		t.Errorf("lower 9 from 5 without an owed key: counter %d, %v, owed %d; want 0, nil, 0", n, err, owed())
	}
	for _, bad := range [][]any{{0, ttl}, {-1, ttl}, {1, 0}, {"x", ttl}, {1.5, ttl}, {int64(1) << 53, ttl}} {
		args := append([]any{time.Hour.Milliseconds()}, bad...)
		if err := JobStateEnqueue.Run(ctx, rdb, post, args...).Err(); err == nil {
			t.Errorf("job_state_enqueue without jobs, raise and ttl %v, accepted; want an error", bad)
		}
	}
}
