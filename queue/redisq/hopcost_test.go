package redisq_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/outflow"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// wantRedisHops pins the Redis commands of each hop of one job on the Redis
// backend (docs/perf.md section 1.2; EVALSHA and every command a script runs
// counted, as INFO commandstats does). A script that gains a command fails
// TestRedisHopCommands: raise the figure only with a reason in the commit
// and docs/architecture.md.
var wantRedisHops = map[string]int64{
	"enqueue":                   16, // the queued index was emptied by the first job: its PTTL, then its PEXPIRE
	"claim":                     11,
	"start":                     13,
	"start, first of a second":  13,
	"outflow flush":             6,
	"finish":                    12,
	"finish, first of a second": 15,
	"turn granted":              6,
	"turn refused":              4,
	"slot":                      7,
	"slot release":              2,
}

// hopCounter counts the commands a private Redis runs in one hop.
type hopCounter struct {
	t   *testing.T
	rdb *redis.Client
	got map[string]int64
}

// hop runs f and records the commands it cost under name.
func (h *hopCounter) hop(name string, f func()) {
	h.t.Helper()
	before := testenv.CommandTotal(h.t, h.rdb)
	f()
	h.got[name] = testenv.CommandTotal(h.t, h.rdb) - before
}

func newHopCounter(t *testing.T) *hopCounter {
	t.Helper()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	if err := lua.LoadAll(context.Background(), rdb); err != nil {
		t.Fatal(err)
	}
	return &hopCounter{t: t, rdb: rdb, got: map[string]int64{}}
}

// TestRedisHopCommands drives two jobs of one tenant through enqueue,
// claim, delivery start and finish on a private Redis (the Redis backend's
// own calls, as the drainer makes them), and the outflow turn and
// concurrency slot of a shaped, capped tenant, and compares each hop's
// commands with wantRedisHops. The first job makes the tenant's keys and
// is the first start of its second; the second job is the common case.
func TestRedisHopCommands(t *testing.T) {
	h := newHopCounter(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "hops")
	prod, err := redisq.NewProducer(redisq.ProducerConfig{Redis: h.rdb})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := redisq.NewConsumer(redisq.ConsumerConfig{Redis: h.rdb})
	if err != nil {
		t.Fatal(err)
	}
	// Both starts fall in one second of Redis TIME (same host): begin at
	// the start of a second; the two jobs take a few ms.
	time.Sleep(time.Second - time.Duration(time.Now().Nanosecond()))
	for i, id := range []string{"first", "second"} {
		name := func(hop string) string {
			if i == 0 {
				return "warm " + hop
			}
			return hop
		}
		h.hop(name("enqueue"), func() {
			if err := prod.Enqueue(ctx, []queue.Envelope{{ID: id, Tenant: tenant, Type: "t", Cost: 1}}); err != nil {
				t.Fatal(err)
			}
		})
		var job *queue.Claimed
		h.hop(name("claim"), func() {
			if job, _, err = cons.Claim(ctx, tenant); err != nil || job == nil || job.Envelope.ID != id {
				t.Fatalf("claim: %v, %v", job, err)
			}
		})
		start := "start"
		if i == 0 {
			start = "start, first of a second"
		}
		h.hop(start, func() {
			d := jobstate.Dispatch{Tenant: tenant, JobID: id, Member: job.Token(), Attempt: 1,
				EnqueuedAt: job.Envelope.EnqueuedAt, Lease: time.Minute}
			if st, err := jobstate.ReadStart(d.Call().Run(ctx, h.rdb).Val()); err != nil || !st.Deliver {
				t.Fatalf("start: %+v, %v", st, err)
			}
		})
		finish := "finish"
		if i == 0 {
			finish = "finish, first of a second"
		}
		h.hop(finish, func() {
			if err := cons.Finish(ctx, job, queue.Outcome{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	h.hop("outflow flush", func() {
		a := jobstate.OutflowAdd{Tenant: tenant, Units: map[int64]int64{time.Now().Unix(): 2}}
		if n, err := jobstate.OutflowAddReply(a.Call().Run(ctx, h.rdb).Val()); err != nil || n != 1 {
			t.Fatalf("outflow flush: %d, %v", n, err)
		}
	})
	if bad := testenv.KeysWithoutTTL(t, h.rdb, "sluice:{"+tenant+"}*"); len(bad) > 0 {
		t.Errorf("keys without a TTL after the run: %v", bad)
	}
	gateHops(t, h, tenant)
	got := map[string]int64{}
	for k := range wantRedisHops {
		got[k] = h.got[k]
	}
	if d := cmp.Diff(wantRedisHops, got); d != "" {
		t.Errorf("Redis commands per hop (-want +got):\n%s\nall readings: %v", d, h.got)
	}
}

// gateHops counts a shaped tenant's bucket turn (granted, then refused: the
// bucket of capacity 2 is full) and a capped tenant's slot and its release.
func gateHops(t *testing.T, h *hopCounter, tenant string) {
	t.Helper()
	ctx := context.Background()
	b := outflow.NewBucket(h.rdb)
	lim := outflow.Limit{Rate: 0.001, Capacity: 2}
	if _, err := b.Take(ctx, tenant, lim, 1); err != nil { // makes the water key
		t.Fatal(err)
	}
	for _, name := range []string{"turn granted", "turn refused"} {
		h.hop(name, func() {
			r, err := b.Take(ctx, tenant, lim, 1)
			if err != nil || r.Allowed != (name == "turn granted") {
				t.Fatalf("%s: %+v, %v", name, r, err)
			}
		})
	}
	s := outflow.NewSemaphore(h.rdb)
	h.hop("slot", func() {
		if held, _, err := s.Acquire(ctx, tenant, 2, "m", time.Minute); err != nil || !held {
			t.Fatalf("slot: %v, %v", held, err)
		}
	})
	h.hop("slot release", func() {
		if err := s.Release(ctx, tenant, "m"); err != nil {
			t.Fatal(err)
		}
	})
}
