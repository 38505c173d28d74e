package limits

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestSubmitGroupedCall: concurrent Submits on two tenants, which the
// batched Admitter puts into shared script calls where submit.lua writes
// each tenant's admitted enqueues as one group and each GCRA key once.
// What is left is what one Submit after the other would leave: exactly the
// limit admitted per tenant, and exactly the backlog gate's room on the
// gated one; each admitted reply a distinct queue length 1..n and backlog;
// the queue, the sequence, the queued index and every job's state seq in
// one order; a refused request's job nowhere.
func TestSubmitGroupedCall(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	a := admNew(t, rdb, AdmitterConfig{})
	ctx := context.Background()
	const sent = 60
	cases := []struct {
		tenant      string
		limit, gate int64
		want        int
	}{
		{admTenant(t, rdb), 25, 0, 25},   // the policy refuses after 25
		{admTenant(t, rdb), 100, 17, 17}, // the backlog gate after 17
	}
	type got struct {
		id string
		s  Submitted
	}
	results := make([][]got, len(cases))
	var mu sync.Mutex
	var wg sync.WaitGroup
	now := admAt(1)
	for c, tc := range cases {
		pol := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: tc.limit, Period: time.Hour, Burst: tc.limit}
		for i := range sent {
			wg.Go(func() {
				id := fmt.Sprintf("j%02d", i)
				s, err := a.Submit(ctx, Request{Tenant: tc.tenant, Policies: []Policy{pol}, MaxBacklog: tc.gate, Now: now},
					submitThen(tc.tenant, id, 60000))
				if err != nil {
					t.Errorf("%s %s: %v", tc.tenant, id, err)
					return
				}
				mu.Lock()
				results[c] = append(results[c], got{id, s})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for c, tc := range cases {
		var lens, backlogs []int64
		admitted := map[string]bool{}
		for _, r := range results[c] {
			if r.s.Allowed {
				admitted[r.id] = true
				lens, backlogs = append(lens, r.s.QueueLength), append(backlogs, r.s.Backlog)
			}
		}
		if len(admitted) != tc.want {
			t.Fatalf("%s: %d admitted of %d, want %d", tc.tenant, len(admitted), sent, tc.want)
		}
		slices.Sort(lens)
		slices.Sort(backlogs)
		for i := range lens {
			if lens[i] != int64(i+1) || backlogs[i] != int64(i+1) {
				t.Fatalf("%s: admitted replies' queue lengths %v and backlogs %v, want 1..%d each", tc.tenant, lens, backlogs, tc.want)
			}
		}
		checkGroupedState(t, rdb, tc.tenant, admitted)
	}
}

// checkGroupedState checks that tenant's queue holds exactly the admitted
// jobs, that the queued index, the sequence and each state's seq agree with
// the queue's order, and that the backlog counts them.
func checkGroupedState(t *testing.T, rdb redis.UniversalClient, tenant string, admitted map[string]bool) {
	t.Helper()
	ctx := context.Background()
	q, err := rdb.LRange(ctx, keys.Queue(tenant), 0, -1).Result()
	if err != nil || len(q) != len(admitted) {
		t.Fatalf("%s: queue %d entries (%v), want %d", tenant, len(q), err, len(admitted))
	}
	index, err := rdb.ZRangeWithScores(ctx, keys.JobIndex(tenant, "queued"), 0, -1).Result()
	if err != nil || len(index) != len(q) {
		t.Fatalf("%s: queued index %d members (%v), want %d", tenant, len(index), err, len(q))
	}
	for i, env := range q {
		id := env[len(`{"v":1,"id":"`) : len(`{"v":1,"id":"`)+3]
		if !admitted[id] {
			t.Errorf("%s: queue entry %d is %s, which was not admitted", tenant, i, id)
		}
		if index[i].Member != id || index[i].Score != float64(i+1) {
			t.Errorf("%s: queued index entry %d = %v, want %s at %d", tenant, i, index[i], id, i+1)
		}
		seq, _ := rdb.HGet(ctx, keys.JobState(tenant, id), "seq").Result()
		if seq != strconv.Itoa(i+1) {
			t.Errorf("%s: %s's state seq %q, want %d (its place in the queue)", tenant, id, seq, i+1)
		}
	}
	if s, _ := rdb.Get(ctx, keys.JobSeq(tenant)).Int(); s != len(q) {
		t.Errorf("%s: sequence %d, want %d", tenant, s, len(q))
	}
	if b, _ := rdb.Get(ctx, keys.Backlog(tenant)).Int(); b != len(q) {
		t.Errorf("%s: backlog %d, want %d", tenant, b, len(q))
	}
	for _, k := range []string{keys.Queue(tenant), keys.Backlog(tenant), keys.JobIndex(tenant, "queued"), keys.JobSeq(tenant)} {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s: TTL %v, want one", k, ttl)
		}
	}
}

// TestSubmitGroupedCallError: a tenant whose queue key holds the wrong type
// fails its group's write; each of its Submits gets the Redis error, and a
// second tenant's Submits in the same calls are admitted and enqueued.
func TestSubmitGroupedCallError(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	a := admNew(t, rdb, AdmitterConfig{})
	ctx := context.Background()
	bad, good := admTenant(t, rdb), admTenant(t, rdb)
	if err := rdb.Set(ctx, keys.Queue(bad), "not a list", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	pol := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 1000, Period: time.Hour, Burst: 1000}
	const sent = 30
	var badErrs, goodOK atomic.Int64
	admitted := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range sent {
		for _, tenant := range []string{bad, good} {
			wg.Go(func() {
				id := fmt.Sprintf("j%02d", i)
				s, err := a.Submit(ctx, Request{Tenant: tenant, Policies: []Policy{pol}, Now: admAt(1)}, submitThen(tenant, id, 60000))
				switch {
				case tenant == bad && err != nil && strings.Contains(err.Error(), "WRONGTYPE"):
					badErrs.Add(1)
				case tenant == good && err == nil && s.Allowed:
					goodOK.Add(1)
					mu.Lock()
					admitted[id] = true
					mu.Unlock()
				default:
					t.Errorf("%s %s: %+v, %v", tenant, id, s, err)
				}
			})
		}
	}
	wg.Wait()
	if badErrs.Load() != sent || goodOK.Load() != sent {
		t.Fatalf("%d WRONGTYPE errors for the bad tenant, %d admitted for the good one; want %d each", badErrs.Load(), goodOK.Load(), sent)
	}
	checkGroupedState(t, rdb, good, admitted)
}
