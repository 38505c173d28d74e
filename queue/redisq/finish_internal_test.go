package redisq

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// ackCase is one job of the batch: how it ends, and what happens to it
// before its finish.
type ackCase struct {
	state, lastErr, reason, dead string
	lost, purged                 bool
}

var ackCases = []ackCase{
	{state: jobstate.Done},
	{state: jobstate.Dead, lastErr: "410", reason: "rejected", dead: `{"letter":1}`},
	{state: jobstate.Done, lost: true},                          // a reaper took the lease
	{state: jobstate.Cancelled, reason: "purged", purged: true}, // a purge cancelled it meanwhile
	{state: ""}, // a duplicate: nothing recorded
	{state: jobstate.Expired, reason: "expired"},
	{state: jobstate.Done, lastErr: "503 then fine"},
}

// ackTenant queues and takes one job per ackCase for a new tenant, applies
// each case's event, and returns the finishes' arguments.
func ackTenant(t *testing.T, rdb *redis.Client, prod *Producer, cons *Consumer, name string, at time.Time) (string, []ackArgs) {
	t.Helper()
	ctx := context.Background()
	tenant := testenv.Name(t, name)
	envs := make([]queue.Envelope, len(ackCases))
	for i := range envs {
		envs[i] = queue.Envelope{ID: string(rune('a' + i)), Tenant: tenant, Type: "t", Cost: int64(i + 1), EnqueuedAt: at}
	}
	if err := prod.Enqueue(ctx, envs); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := cons.Take(ctx, tenant, len(envs))
	if err != nil || len(jobs) != len(envs) {
		t.Fatalf("take: %d jobs, %v", len(jobs), err)
	}
	args := make([]ackArgs, len(jobs))
	for i, j := range jobs {
		c := ackCases[i]
		if c.lost {
			rdb.ZRem(ctx, keys.Processing(tenant), j.Token())
		}
		if c.purged {
			rdb.HSet(ctx, keys.JobState(tenant, j.Envelope.ID), "state", jobstate.Cancelled, "reason", "purged")
		}
		args[i] = ackArgs{Tenant: tenant, JobID: j.Envelope.ID, Member: j.Token(), Cost: j.Envelope.Cost,
			DeadLetter: c.dead, State: c.state, LastError: c.lastErr, Reason: c.reason, InLease: j.InLease}
	}
	return tenant, args
}

// ackEnv is the shared Redis with sluice's scripts loaded, a producer and a
// consumer (1-minute leases) on it.
func ackEnv(t *testing.T) (*redis.Client, *Producer, *Consumer) {
	t.Helper()
	rdb := testenv.Redis(t)
	if err := lua.LoadAll(context.Background(), rdb); err != nil {
		t.Fatal(err)
	}
	prod, err := NewProducer(ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := NewConsumer(ConsumerConfig{Redis: rdb, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return rdb, prod, cons
}

// TestAckBatchMatchesSingleCalls: one ack.lua call that finishes a
// tenant's jobs (held, dead with a letter, lease lost, purged meanwhile,
// a duplicate, dropped) answers and writes what one call per job, in the
// same order, does: the replies, the backlog, the leases, each job's state
// and every job index and dead letter, every key with a TTL.
func TestAckBatchMatchesSingleCalls(t *testing.T) {
	t.Parallel()
	rdb, prod, cons := ackEnv(t)
	ctx := context.Background()
	at := time.Now().UTC()
	one, oneArgs := ackTenant(t, rdb, prod, cons, "ack1", at)
	all, allArgs := ackTenant(t, rdb, prod, cons, "ackn", at)
	t.Cleanup(func() {
		testenv.DeleteTenant(t, rdb, one)
		testenv.DeleteTenant(t, rdb, all)
	})

	var single []bool
	for _, a := range oneArgs {
		v, err := ackCall([]ackArgs{a}).Run(ctx, rdb).Result()
		if err != nil {
			t.Fatal(err)
		}
		held, err := parseAck(v, 1)
		if err != nil {
			t.Fatal(err)
		}
		single = append(single, held[0])
	}
	v, err := ackCall(allArgs).Run(ctx, rdb).Result()
	if err != nil {
		t.Fatal(err)
	}
	batched, err := parseAck(v, len(allArgs))
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, false, true, true, true, true}
	if !cmp.Equal(single, want) || !cmp.Equal(batched, want) {
		t.Errorf("held: one call per job %v, one call %v; want %v", single, batched, want)
	}
	a, b := testenv.TenantDump(t, rdb, one), testenv.TenantDump(t, rdb, all)
	if d := cmp.Diff(a, b); d != "" {
		t.Errorf("keys after one call per job (-) and one call for all (+):\n%s", d)
	}
	if done := b[":jobs:done"]; !cmp.Equal(done, []string{"a", "c", "g"}) || !cmp.Equal(b[":jobs:dead"], []string{"b"}) {
		t.Errorf("done index %v, dead index %v; want [a c g] and [b]", b[":jobs:done"], b[":jobs:dead"])
	}
	if _, ok := b[":processing"]; ok {
		t.Errorf("leases left: %v", b[":processing"])
	}
	if bad := testenv.KeysWithoutTTL(t, rdb, "sluice:{"+all+"}*"); len(bad) > 0 {
		t.Errorf("keys without a TTL: %v", bad)
	}
	// Costs 1 to 7 were queued (28). A purged job's cost left the backlog
	// with the purge, a lost lease's leaves it with whoever finishes the
	// copy; the other five leave it here.
	if got := b[":backlog"]; got != "7" {
		t.Errorf("backlog %v, want 7 (28 - 1 - 2 - 5 - 6 - 7)", got)
	}
}

// TestAckRefusesBadCosts: ack.lua refuses a cost that is no integer >= 1,
// and costs that sum past limits.MaxCost (its Lua doubles would round the
// sum), before any write: the leases and states stay as they were.
func TestAckRefusesBadCosts(t *testing.T) {
	t.Parallel()
	rdb, prod, cons := ackEnv(t)
	ctx := context.Background()
	tenant, args := ackTenant(t, rdb, prod, cons, "ackbad", time.Now().UTC())
	t.Cleanup(func() { testenv.DeleteTenant(t, rdb, tenant) })
	before := testenv.TenantDump(t, rdb, tenant)
	for _, c := range []struct {
		costs []int64
		want  string
	}{
		{[]int64{1, 0}, "job 2: cost 0 is not an integer >= 1"},
		{[]int64{limits.MaxCost, 1}, "sum past 2^53 - 1"},
	} {
		jobs := append([]ackArgs(nil), args[:len(c.costs)]...)
		for i, cost := range c.costs {
			jobs[i].Cost = cost
		}
		err := ackCall(jobs).Run(ctx, rdb).Err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("costs %v: %v, want an error naming %q", c.costs, err, c.want)
		}
		if d := cmp.Diff(before, testenv.TenantDump(t, rdb, tenant)); d != "" {
			t.Errorf("costs %v: keys changed by a refused call (-before +after):\n%s", c.costs, d)
		}
	}
}
