package redisq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// consPush queues n jobs of tenant the way RedisProducer does (RPUSH + backlog).
func consPush(t *testing.T, rdb redis.UniversalClient, tenant string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		e := queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: tenant, Type: "t", Cost: 2, EnqueuedAt: time.Unix(1, 0).UTC()}
		b, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.RPush(ctx, keys.Queue(tenant), b).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.IncrBy(ctx, keys.Backlog(tenant), e.Cost).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func consQueued(t *testing.T, rdb redis.UniversalClient, tenant string) []string {
	t.Helper()
	raw, err := rdb.LRange(context.Background(), keys.Queue(tenant), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, r := range raw {
		e, err := queue.Decode([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

func consBacklog(t *testing.T, rdb redis.UniversalClient, tenant string) int64 {
	t.Helper()
	n, err := rdb.Get(context.Background(), keys.Backlog(tenant)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return n
}

func consClaim(t *testing.T, c *Consumer, tenant string, nowMS int64) *queue.Claimed {
	t.Helper()
	j, _, err := c.claimAt(context.Background(), tenant, nowMS)
	if err != nil {
		t.Fatal(err)
	}
	if j == nil {
		t.Fatalf("claim %s: no job, want one", tenant)
	}
	return j
}

const consMS0 = int64(1_800_000_000_000) // a fixed instant, unix ms

func TestRedisConsumerLeaseKeys(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "cons")
	consPush(t, rdb, tenant, "a", "b")
	c := newTestConsumer(t, ConsumerConfig{Redis: rdb, Lease: time.Second})

	j := consClaim(t, c, tenant, consMS0)
	if diff := cmp.Diff("a", j.Envelope.ID); diff != "" {
		t.Errorf("claimed id (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b"}, consQueued(t, rdb, tenant)); diff != "" {
		t.Errorf("queue after claim (-want +got):\n%s", diff)
	}
	score, err := rdb.ZScore(ctx, keys.Processing(tenant), j.Token()).Result()
	if err != nil || int64(score) != consMS0+1000 {
		t.Errorf("lease deadline = %v (%v), want %d", int64(score), err, consMS0+1000)
	}
	if err := c.Finish(ctx, j, queue.Outcome{}); err != nil {
		t.Fatal(err)
	}
	if got := consBacklog(t, rdb, tenant); got != 2 {
		t.Errorf("backlog after one finish = %d, want 2", got)
	}
	if n, _ := rdb.ZCard(ctx, keys.Processing(tenant)).Result(); n != 0 {
		t.Errorf("processing set has %d members after finish, want 0", n)
	}
	if err := c.Finish(ctx, j, queue.Outcome{}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("second finish: err = %v, want queue.ErrLeaseLost", err)
	}
	if got := consBacklog(t, rdb, tenant); got != 2 {
		t.Errorf("backlog after a repeated finish = %d, want 2 (unchanged)", got)
	}
	j2 := consClaim(t, c, tenant, consMS0)
	if err := c.Finish(ctx, j2, queue.Outcome{}); err != nil {
		t.Fatal(err)
	}
	if got := consBacklog(t, rdb, tenant); got != 0 {
		t.Errorf("backlog after all finished = %d, want 0", got)
	}
	if j, wait, err := c.claimAt(ctx, tenant, consMS0); j != nil || err != nil || wait != c.cfg.Poll {
		t.Errorf("claim on empty queue = %v, %v, %v; want nil, %v, nil", j, wait, err, c.cfg.Poll)
	}
}

func TestRedisConsumerReapReturnsExpiredLeasesInOrder(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "cons")
	consPush(t, rdb, tenant, "a", "b", "c", "d")
	c := newTestConsumer(t, ConsumerConfig{Redis: rdb, Lease: time.Second})
	a := consClaim(t, c, tenant, consMS0)
	b := consClaim(t, c, tenant, consMS0+10)
	cj := consClaim(t, c, tenant, consMS0+500)

	tests := []struct {
		now       int64
		wantN     int
		wantQueue []string
	}{
		{consMS0 + 999, 0, []string{"d"}},
		{consMS0 + 1011, 2, []string{"a", "b", "d"}}, // a and b expired, back at the head in order
		{consMS0 + 1011, 0, []string{"a", "b", "d"}},
	}
	for i, tc := range tests {
		n, err := c.reapAt(ctx, tenant, tc.now)
		if err != nil {
			t.Fatal(err)
		}
		if n != tc.wantN {
			t.Errorf("step %d: reaped %d, want %d", i, n, tc.wantN)
		}
		if diff := cmp.Diff(tc.wantQueue, consQueued(t, rdb, tenant)); diff != "" {
			t.Errorf("step %d: queue (-want +got):\n%s", i, diff)
		}
	}
	if err := c.Finish(ctx, a, queue.Outcome{}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("finish of a reaped job: err = %v, want queue.ErrLeaseLost", err)
	}
	if err := c.Release(ctx, b); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("release of a reaped job: err = %v, want queue.ErrLeaseLost", err)
	}
	lost, err := c.Extend(ctx, tenant, []*queue.Claimed{a, cj})
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0] != a {
		t.Errorf("extend: lost = %v, want only a", lost)
	}
}

func TestRedisConsumerDelayedSet(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "cons")
	consPush(t, rdb, tenant, "a", "b")
	c := newTestConsumer(t, ConsumerConfig{Redis: rdb, Lease: time.Minute, Poll: time.Second})

	a := consClaim(t, c, tenant, consMS0)
	next := a.Envelope
	next.Attempt = 1
	if err := c.Defer(ctx, a, queue.Retry{Delay: 200 * time.Millisecond, Next: next}); err != nil {
		t.Fatal(err)
	}
	// The deferred job waits in the delayed set; b is claimed meanwhile.
	b := consClaim(t, c, tenant, 0)
	if err := c.Finish(ctx, b, queue.Outcome{}); err != nil {
		t.Fatal(err)
	}
	j, wait, err := c.Claim(ctx, tenant)
	if err != nil || j != nil {
		t.Fatalf("claim before a is due = %v, %v; want no job", j, err)
	}
	if wait <= 0 || wait > 200*time.Millisecond {
		t.Errorf("wait hint = %v, want (0, 200ms]: the deferred job's due time, below the 1s poll", wait)
	}
	// Due later: claiming at a fixed instant past the due time promotes it.
	due, _ := rdb.ZRangeWithScores(ctx, keys.Delayed(tenant), 0, 0).Result()
	if len(due) != 1 {
		t.Fatalf("delayed set = %v, want one job", due)
	}
	a2 := consClaim(t, c, tenant, int64(due[0].Score))
	if a2.Envelope.ID != "a" || a2.Envelope.Attempt != 1 {
		t.Errorf("promoted job = %s attempt %d, want a attempt 1", a2.Envelope.ID, a2.Envelope.Attempt)
	}
}

func TestRedisConsumerCancelledAndPoison(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "cons")
	consPush(t, rdb, tenant, "x", "y", "z")
	rdb.RPush(ctx, keys.Queue(tenant), "not json")
	rdb.Set(ctx, keys.JobState(tenant, "x"), "cancelled", time.Minute)
	rdb.HSet(ctx, keys.JobState(tenant, "y"), "state", "cancelled")
	rdb.HSet(ctx, keys.JobState(tenant, "z"), "state", "queued")
	t.Cleanup(func() {
		rdb.Del(context.Background(), keys.JobState(tenant, "x"), keys.JobState(tenant, "y"), keys.JobState(tenant, "z"))
	})
	c := newTestConsumer(t, ConsumerConfig{Redis: rdb})
	var got []string
	for i := 0; i < 4; i++ {
		j := consClaim(t, c, tenant, 0)
		got = append(got, fmt.Sprintf("%s cancelled=%v poison=%v", j.Envelope.ID, j.Cancelled, j.DecodeErr != nil))
	}
	want := []string{"x cancelled=true poison=false", "y cancelled=true poison=false", "z cancelled=false poison=false", "? cancelled=false poison=true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
}

func TestRedisConsumerTenantsAndCluster(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
	}{
		{"standalone", testenv.Redis(t)},
		{"cluster", testenv.Cluster(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tenant := testenv.Name(t, "cons")
			consPush(t, tc.rdb, tenant, "a")
			t.Cleanup(func() { tc.rdb.Del(context.Background(), keys.Queue(tenant), keys.Backlog(tenant)) })
			c := newTestConsumer(t, ConsumerConfig{Redis: tc.rdb, Tenants: []string{"configured"}})
			ts, err := c.Tenants(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var haveConf, haveScan bool
			for _, x := range ts {
				haveConf = haveConf || x == "configured"
				haveScan = haveScan || x == tenant
			}
			if !haveConf || !haveScan {
				t.Errorf("tenants = %v, want both configured and %s", ts, tenant)
			}
			j, _, err := c.Claim(ctx, tenant)
			if err != nil || j == nil {
				t.Fatalf("claim = %v, %v", j, err)
			}
			if err := c.Finish(ctx, j, queue.Outcome{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func BenchmarkRedisConsumerClaimFinish(b *testing.B) {
	rdb := testenv.Redis(b)
	ctx := context.Background()
	tenant := testenv.Name(b, "cons")
	c := newTestConsumer(b, ConsumerConfig{Redis: rdb})
	e := queue.Envelope{Version: queue.EnvelopeVersion, ID: "j", Tenant: tenant, Cost: 1, Payload: json.RawMessage(`{"to":"x@example.com"}`)}
	raw, _ := e.Encode()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := rdb.RPush(ctx, keys.Queue(tenant), raw).Err(); err != nil {
			b.Fatal(err)
		}
		j, _, err := c.Claim(ctx, tenant)
		if err != nil || j == nil {
			b.Fatal(j, err)
		}
		if err := c.Finish(ctx, j, queue.Outcome{}); err != nil {
			b.Fatal(err)
		}
	}
}

// newTestConsumer returns a consumer of cfg, failing the test on an error.
func newTestConsumer(t testing.TB, cfg ConsumerConfig) *Consumer {
	t.Helper()
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
