package jobstate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
)

// TestDoneTrimEvery: a done finish trims the done index only when its seq
// is a multiple of keys.DoneTrimEvery, when it has no seq, or when the
// caller says it is its first finish of the tenant in the second
// (Settle.Refresh); the index then again holds at most keys.DoneMax.
func TestDoneTrimEvery(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "trim")
	dk := keys.JobIndex(tenant, jobstate.Done)
	defer rdb.Del(ctx, dk)
	now := time.Now().UnixMilli()
	zs := make([]redis.Z, 0, 1000)
	for i := range keys.DoneMax {
		zs = append(zs, redis.Z{Score: float64(now - 60000 + int64(i)), Member: fmt.Sprintf("d%05d", i)})
		if len(zs) == cap(zs) {
			rdb.ZAdd(ctx, dk, zs...)
			zs = zs[:0]
		}
	}
	for _, step := range []struct {
		seq     int
		refresh bool
		want    int64
	}{
		{seq: 1, want: keys.DoneMax + 1},
		{seq: 2, want: keys.DoneMax + 2},
		{seq: 2 * keys.DoneTrimEvery, want: keys.DoneMax},
		{seq: 3, want: keys.DoneMax + 1},
		{seq: 5, refresh: true, want: keys.DoneMax},
		{seq: 0, want: keys.DoneMax}, // no seq recorded: trimmed
	} {
		id := fmt.Sprintf("job-%d", step.seq)
		sk := keys.JobState(tenant, id)
		if step.seq > 0 {
			rdb.HSet(ctx, sk, "state", "in_flight", "seq", step.seq)
		}
		s := jobstate.Settle{Tenant: tenant, JobID: id, Member: id + "|1", State: jobstate.Done, Refresh: step.refresh}
		if err := s.Call().Run(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
		rdb.Del(ctx, sk)
		if n := rdb.ZCard(ctx, dk).Val(); n != step.want {
			t.Errorf("after the done finish of seq %d (refresh %v): index holds %d, want %d", step.seq, step.refresh, n, step.want)
		}
	}
}
