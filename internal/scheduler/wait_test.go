package scheduler

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// TestAddWait: a store of scheduled jobs with a replica wait that no
// replica answers fails with an error wrapping lua.ErrWaitShort after the
// jobs and the hint are written (on the primary: a retry replaces them by
// id); with a replica in sync it returns nil.
func TestAddWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary := testenv.StartRedis(t, "--repl-diskless-sync-delay", "0")
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	t.Cleanup(func() { rdb.Close() })
	tenant := testenv.Name(t, "addwait")
	w := lua.Wait{Replicas: 1, Timeout: 20 * time.Millisecond}
	due := time.Now().Add(time.Hour)

	err := AddWait(ctx, rdb, tenant, []Job{job(tenant, "a", due)}, 100, w)
	if !errors.Is(err, lua.ErrWaitShort) {
		t.Fatalf("AddWait without a replica = %v, want lua.ErrWaitShort", err)
	}
	if n, err := rdb.HLen(ctx, keys.ScheduledJobs(tenant)).Result(); err != nil || n != 1 {
		t.Errorf("scheduled jobs after the short WAIT = %d, %v; want 1 (stored on the primary)", n, err)
	}
	if _, err := rdb.ZScore(ctx, keys.ScheduledTenants(), tenant).Result(); err != nil {
		t.Errorf("due hint after the short WAIT: %v, want it written", err)
	}

	replica := testenv.StartReplica(t, primary)
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	t.Cleanup(func() { rc.Close() })
	testenv.WaitFor(t, 10*time.Second, "the replica in sync", func() bool {
		return rc.HLen(ctx, keys.ScheduledJobs(tenant)).Val() == 1
	})
	w.Timeout = time.Second // ample: a replica in sync acks within a few ms
	if err := AddWait(ctx, rdb, tenant, []Job{job(tenant, "b", due)}, 100, w); err != nil {
		t.Errorf("AddWait with the replica in sync: %v", err)
	}
}
