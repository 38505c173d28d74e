package kafkaq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// finishCase is one job of the batch: how it ends, and what happened to it
// before its finish.
type finishCase struct {
	state, lastErr, reason, dead string
	purged, unrecorded           bool
}

var finishCases = []finishCase{
	{state: jobstate.Done},
	{state: jobstate.Dead, lastErr: "410", reason: "rejected", dead: `{"letter":1}`},
	{state: ""}, // a duplicate: only its cost
	{state: jobstate.Cancelled, reason: "purged", purged: true},
	{state: jobstate.Done, unrecorded: true}, // finished before its post-ack write
	{state: jobstate.Expired, reason: "expired"},
	{state: jobstate.Done, lastErr: "503 then fine"},
}

// finishTenant records each finishCase's job started (jobstate.Dispatch;
// not the unrecorded one) for a new tenant whose backlog counter holds
// backlog, and returns the finishes.
func finishTenant(t *testing.T, rdb *redis.Client, name string, backlog int64, at time.Time) (string, []kafkaFinish) {
	t.Helper()
	ctx := context.Background()
	tenant := testenv.Name(t, name)
	rdb.Set(ctx, keys.Backlog(tenant), backlog, keys.BacklogTTL)
	out := make([]kafkaFinish, len(finishCases))
	for i, c := range finishCases {
		id, member := string(rune('a'+i)), string(rune('a'+i))+"|m"
		if !c.unrecorded {
			d := jobstate.Dispatch{Tenant: tenant, JobID: id, Member: member, Attempt: 1, EnqueuedAt: at, Lease: time.Minute}
			if _, err := jobstate.ReadStart(d.Call().Run(ctx, rdb).Val()); err != nil {
				t.Fatal(err)
			}
		}
		if c.purged {
			rdb.HSet(ctx, keys.JobState(tenant, id), "state", jobstate.Cancelled, "reason", "purged")
		}
		out[i] = kafkaFinish{Settle: jobstate.Settle{Tenant: tenant, JobID: id, Member: member, State: c.state,
			LastError: c.lastErr, Reason: c.reason, DeadLetter: c.dead, DiedAt: at}, Cost: int64(i + 1), Record: fmt.Sprintf("0@%d", i)}
	}
	return tenant, out
}

// TestKafkaFinishBatchMatchesSingleCalls: one kafka_finish.lua call that
// finishes a tenant's jobs (done, dead with a letter, a duplicate, purged
// meanwhile, finished before its post-ack write, dropped) writes what one
// call per job, in the same order, does: each job's state, the job indexes
// and dead letters, the deliveries in progress, and the backlog counter
// and its debt, every key with a TTL. Run with a counter that covers the
// costs and with one that falls short (the rest owed).
func TestKafkaFinishBatchMatchesSingleCalls(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	if err := lua.LoadAll(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Millisecond)
	// Costs 1 to 7 (28); the purged job's 4 is not lowered again: 24.
	for _, c := range []struct {
		backlog     int64
		left, owed  string
		description string
	}{
		{30, "6", "", "a counter that covers the costs"},
		{20, "0", "4", "a counter 4 short"},
	} {
		one, oneJobs := finishTenant(t, rdb, "kf1", c.backlog, at)
		all, allJobs := finishTenant(t, rdb, "kfn", c.backlog, at)
		t.Cleanup(func() {
			testenv.DeleteTenant(t, rdb, one)
			testenv.DeleteTenant(t, rdb, all)
		})
		for _, j := range oneJobs {
			if _, err := parseKafkaFinish(kafkaFinishCall([]kafkaFinish{j}).Run(ctx, rdb).Val(), 1); err != nil {
				t.Fatal(err)
			}
		}
		left, err := parseKafkaFinish(kafkaFinishCall(allJobs).Run(ctx, rdb).Val(), len(allJobs))
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := rdb.Get(ctx, keys.Backlog(all)).Int64(); len(left) != len(allJobs) || left[0] != want {
			t.Errorf("%s: reply %v, want the counter %d for each job", c.description, left, want)
		}
		a, b := testenv.TenantDump(t, rdb, one), testenv.TenantDump(t, rdb, all)
		if d := cmp.Diff(a, b); d != "" {
			t.Errorf("%s: keys after one call per job (-) and one call for all (+):\n%s", c.description, d)
		}
		if b[":backlog"] != c.left || (c.owed != "" && b[":backlog_owed"] != c.owed) {
			t.Errorf("%s: backlog %v owed %v, want %s and %q", c.description, b[":backlog"], b[":backlog_owed"], c.left, c.owed)
		}
		if !cmp.Equal(b[":jobs:done"], []string{"a", "e", "g"}) || !cmp.Equal(b[":jobs:dead"], []string{"b"}) {
			t.Errorf("%s: done index %v, dead index %v; want [a e g] and [b]", c.description, b[":jobs:done"], b[":jobs:dead"])
		}
		if bad := testenv.KeysWithoutTTL(t, rdb, "sluice:{"+all+"}*"); len(bad) > 0 {
			t.Errorf("%s: keys without a TTL: %v", c.description, bad)
		}
	}
}

// TestKafkaFinishSentTwiceFinishesOnce: a finish sent again after its first
// send ran (its reply lost: heldfinish.go sends it again) changes nothing:
// the backlog is lowered once, and the states, indexes and dead letters
// are those of one send. The same record claimed again (a revoke handed it
// to another owner: another member) is not lowered again; another copy of
// the job (another record) is.
func TestKafkaFinishSentTwiceFinishesOnce(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	if err := lua.LoadAll(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Millisecond)
	tenant, jobs := finishTenant(t, rdb, "kf2", 100, at)
	t.Cleanup(func() { testenv.DeleteTenant(t, rdb, tenant) })
	send := func() {
		t.Helper()
		if _, err := parseKafkaFinish(kafkaFinishCall(jobs).Run(ctx, rdb).Val(), len(jobs)); err != nil {
			t.Fatal(err)
		}
	}
	send()
	once := testenv.TenantDump(t, rdb, tenant)
	send()
	twice := testenv.TenantDump(t, rdb, tenant)
	if d := cmp.Diff(once, twice); d != "" {
		t.Errorf("keys after one send (-) and the same finish sent again (+):\n%s", d)
	}
	if once[":backlog"] != "76" { // 100 - (28 - the purged job's 4)
		t.Errorf("backlog %v after one send, want 76", once[":backlog"])
	}
	again := jobs[0]
	again.Member, again.State = "a|another-claim", "" // the next owner's duplicate of the same record
	if _, err := parseKafkaFinish(kafkaFinishCall([]kafkaFinish{again}).Run(ctx, rdb).Val(), 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int64(); got != 76 {
		t.Errorf("backlog %d after the same record's finish by another claim, want 76 (not lowered again)", got)
	}
	// The next owner started the same record (an envelope without
	// enqueued_at: the start's copy check cannot tell it done) and
	// finishes it: the state becomes done again and its delivery leaves
	// the deliveries in progress, still without lowering the backlog.
	rdb.HSet(ctx, keys.JobState(tenant, "a"), "state", jobstate.InFlight)
	rdb.ZAdd(ctx, keys.Delivering(tenant), redis.Z{Score: 1, Member: "a|next-owner"})
	next := jobs[0]
	next.Member = "a|next-owner"
	if _, err := parseKafkaFinish(kafkaFinishCall([]kafkaFinish{next}).Run(ctx, rdb).Val(), 1); err != nil {
		t.Fatal(err)
	}
	if st := rdb.HGet(ctx, keys.JobState(tenant, "a"), "state").Val(); st != jobstate.Done {
		t.Errorf("job a reads %q after its next owner's finish of the same record, want done", st)
	}
	if rdb.ZScore(ctx, keys.Delivering(tenant), "a|next-owner").Err() == nil {
		t.Error("the next owner's delivery is still in progress after its finish")
	}
	if got, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int64(); got != 76 {
		t.Errorf("backlog %d after the next owner's finish of the same record, want 76", got)
	}
	again.Record = "1@99" // another copy of job a, in another partition
	if _, err := parseKafkaFinish(kafkaFinishCall([]kafkaFinish{again}).Run(ctx, rdb).Val(), 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int64(); got != 75 {
		t.Errorf("backlog %d after another copy's finish of job a, want 75", got)
	}
}
