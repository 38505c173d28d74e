package lua

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestJobIndexKeyIsKeysJobIndex: the index key job_state_final.lua derives
// from a job-state key's hash tag, and the job id it reads from it, are
// keys.JobIndex and the id, for every listed state; and the bounds it gets
// are package keys' constants.
func TestJobIndexKeyIsKeysJobIndex(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	probe := New(testenv.Name(t, "probe")+".lua", concat([]string{"job_state_final.lua"})+
		"return {job_index(KEYS[1], ARGV[1]), job_id(KEYS[1]), JOB_INDEX_TTL, DONE_RETENTION_MS, DONE_MAX}")
	tenant := testenv.Name(t, "ix")
	for _, state := range keys.ListedStates {
		for _, id := range []string{"j1", "a.b-c_d", "with:colon"} {
			v, err := probe.Run(ctx, rdb, []string{keys.JobState(tenant, id)}, state).Result()
			if err != nil {
				t.Fatal(err)
			}
			arr, _ := v.([]any)
			if len(arr) != 5 {
				t.Fatalf("reply %v", v)
			}
			if arr[0] != keys.JobIndex(tenant, state) || arr[1] != id {
				t.Errorf("state %s id %s: lua gives index %v id %v, want %s %s", state, id, arr[0], arr[1], keys.JobIndex(tenant, state), id)
			}
			if arr[2] != keys.JobStateTTL.Milliseconds() || arr[3] != keys.DoneRetention.Milliseconds() || arr[4] != int64(keys.DoneMax) {
				t.Errorf("bounds %v, want %d %d %d", arr[2:], keys.JobStateTTL.Milliseconds(), keys.DoneRetention.Milliseconds(), keys.DoneMax)
			}
		}
	}
	if !strings.Contains(Ack.Src(), "local DONE_MAX =") {
		t.Error("ack.lua's source lacks the generated bounds")
	}
}

// TestIndexMove: index_move leaves the old state's index and joins the new
// one's for queued, in_flight, retrying and done, only leaves for dead and
// scheduled, and trims the done index by age and count.
func TestIndexMove(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	move := New(testenv.Name(t, "move")+".lua", concat([]string{"job_state_final.lua"})+`
index_move(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'state', ARGV[2])
return 1`)
	tenant := testenv.Name(t, "mv")
	sk := keys.JobState(tenant, "j")
	defer rdb.Del(ctx, sk)
	for _, s := range keys.ListedStates {
		defer rdb.Del(ctx, keys.JobIndex(tenant, s))
	}
	members := func() map[string]float64 {
		out := map[string]float64{}
		for _, s := range keys.ListedStates {
			zs, err := rdb.ZRangeWithScores(ctx, keys.JobIndex(tenant, s), 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, z := range zs {
				out[s+"/"+z.Member.(string)] = z.Score
			}
		}
		return out
	}
	for _, step := range []struct {
		state string
		score int
		want  string // the one index entry after the step, "" for none
	}{
		{"queued", 7, "queued/j"}, {"in_flight", 100, "in_flight/j"}, {"retrying", 200, "retrying/j"},
		{"in_flight", 300, "in_flight/j"}, {"dead", 400, ""}, {"queued", 8, "queued/j"}, {"scheduled", 500, ""},
		{"queued", 9, "queued/j"}, {"cancelled", 0, ""}, {"done", 600, "done/j"},
	} {
		if err := move.Run(ctx, rdb, []string{sk}, "j", step.state, step.score).Err(); err != nil {
			t.Fatal(err)
		}
		got := members()
		if step.want == "" && len(got) != 0 || step.want != "" && (len(got) != 1 || got[step.want] != float64(step.score)) {
			t.Errorf("after %s: index entries %v, want only %q (score %d)", step.state, got, step.want, step.score)
		}
	}
	// Trim: a done job older than keys.DoneRetention before the newest
	// leaves; the count bound is checked with the real bound in jobstate.
	dk := keys.JobIndex(tenant, "done")
	rdb.ZAdd(ctx, dk, redisZ(1, "old"))
	rdb.Del(ctx, sk)
	now := keys.DoneRetention.Milliseconds() + 10
	if err := move.Run(ctx, rdb, []string{sk}, "j", "done", now).Err(); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.ZScore(ctx, dk, "old").Result(); n != 0 {
		t.Errorf("done entry at 1 ms kept at %d ms", now)
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// TestBacklogDecrSkipsPurged: the Kafka backend's finish of a purged job
// (reason purged) leaves the backlog counter as the purge set it, so the
// jobs queued since stay counted; another job lowers it, never below 0.
func TestBacklogDecrSkipsPurged(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "bd")
	bk, purged, plain := keys.Backlog(tenant), keys.JobState(tenant, "p"), keys.JobState(tenant, "q")
	defer rdb.Del(ctx, bk, purged, plain)
	rdb.Set(ctx, bk, 2, time.Hour)
	rdb.HSet(ctx, purged, "state", "cancelled", "reason", "purged")
	rdb.HSet(ctx, plain, "state", "cancelled")
	for _, step := range []struct {
		sk   string
		want int64
	}{{purged, 2}, {plain, 1}, {plain, 0}, {plain, 0}} {
		n, err := BacklogDecr.Run(ctx, rdb, []string{bk, step.sk}, 1, time.Hour.Milliseconds()).Int64()
		if err != nil || n != step.want {
			t.Errorf("backlog_decr of %s = %d, %v; want %d", step.sk, n, err, step.want)
		}
	}
}

// TestBacklogDecrTTL: backlog_decr.lua refreshes the counter's TTL when
// asked (ARGV[3] "1", keys.Refresh) and whenever it creates or resets the
// counter; otherwise an existing counter keeps the TTL it had.
func TestBacklogDecrTTL(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	bk := keys.Backlog(testenv.Name(t, "bt"))
	defer rdb.Del(ctx, bk)
	ttl := keys.BacklogTTL.Milliseconds()
	for _, step := range []struct {
		name    string
		setup   func()
		refresh string
		want    func(time.Duration) bool
	}{
		{"created", func() { rdb.Del(ctx, bk) }, "0", func(d time.Duration) bool { return d > keys.BacklogTTL-time.Minute }},
		{"kept", func() { rdb.Set(ctx, bk, 5, time.Hour) }, "0", func(d time.Duration) bool { return d > 0 && d <= time.Hour }},
		{"refreshed", func() { rdb.Set(ctx, bk, 5, time.Hour) }, "1", func(d time.Duration) bool { return d > keys.BacklogTTL-time.Minute }},
		{"reset to 0", func() { rdb.Set(ctx, bk, 0, time.Hour) }, "0", func(d time.Duration) bool { return d > keys.BacklogTTL-time.Minute }},
	} {
		step.setup()
		if err := BacklogDecr.Run(ctx, rdb, []string{bk}, 1, ttl, step.refresh).Err(); err != nil {
			t.Fatal(err)
		}
		if d := rdb.PTTL(ctx, bk).Val(); !step.want(d) {
			t.Errorf("%s: PTTL %v", step.name, d)
		}
	}
}
