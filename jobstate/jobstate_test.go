package jobstate_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// t0 is a fixed enqueue instant.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// enqueue queues jobs of tenant (ids in order, type "mail") through the real
// Redis producer, which records their state.
func enqueue(t testing.TB, rdb redis.UniversalClient, tenant string, ids ...string) {
	t.Helper()
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	var envs []queue.Envelope
	for _, id := range ids {
		envs = append(envs, queue.Envelope{ID: id, Tenant: tenant, Type: "mail", Cost: 1, EnqueuedAt: t0})
	}
	if err := p.Enqueue(context.Background(), envs); err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, rdb redis.UniversalClient, tenant, id string) jobstate.Record {
	t.Helper()
	r, err := jobstate.Get(context.Background(), rdb, tenant, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return r
}

// ignoreTimes leaves the times set by Redis TIME out of comparisons.
var ignoreTimes = cmpopts.IgnoreFields(jobstate.Record{}, "UpdatedAt")

func claim(t testing.TB, c *redisq.Consumer, tenant string) *queue.Claimed {
	t.Helper()
	j, _, err := c.Claim(context.Background(), tenant)
	if err != nil || j == nil {
		t.Fatalf("Claim(%s) = %v, %v; want a job", tenant, j, err)
	}
	return j
}

// startRun records d's start as the drainer does (Dispatch.Call, then
// StartReply), in its own round trip.
func startRun(ctx context.Context, rdb redis.Scripter, d jobstate.Dispatch) (bool, error) {
	v, err := d.Call().Run(ctx, rdb).Result()
	if err != nil {
		return true, err
	}
	return jobstate.StartReply(v)
}

// startOf records d's start as startRun does and returns the script's
// whole answer (jobstate.ReadStart), failing t on an error.
func startOf(t testing.TB, rdb redis.Scripter, d jobstate.Dispatch) jobstate.Start {
	t.Helper()
	v, err := d.Call().Run(context.Background(), rdb).Result()
	if err != nil {
		t.Fatal(err)
	}
	s, err := jobstate.ReadStart(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// settleOf runs s's job_state_settle.lua call and fails t on an error.
func settleOf(t testing.TB, rdb redis.Scripter, s jobstate.Settle) {
	t.Helper()
	if err := jobstate.SettleReply(s.Call().Run(context.Background(), rdb).Val()); err != nil {
		t.Fatal(err)
	}
}

func start(t testing.TB, rdb redis.UniversalClient, j *queue.Claimed) bool {
	t.Helper()
	ok, err := startRun(context.Background(), rdb, jobstate.Dispatch{
		Tenant: j.Envelope.Tenant, JobID: j.Envelope.ID, Member: j.Token(), Attempt: j.Envelope.Attempt + 1,
		Lease: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestLifecycleRedis walks jobs through every state on the Redis backend:
// the producer, the consumer's scripts, Start and Cancel, checking each
// record and the queue positions.
func TestLifecycleRedis(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "js")
	enqueue(t, rdb, tenant, "a", "b", "c", "d", "e")
	rec := func(id, state string, attempt int, seq, ahead int64, lastErr, reason string) jobstate.Record {
		return jobstate.Record{JobID: id, Tenant: tenant, Type: "mail", State: state, Attempt: attempt,
			EnqueuedAt: t0, Seq: seq, LastError: lastErr, Reason: reason, Ahead: ahead}
	}
	check := func(step string, want ...jobstate.Record) {
		t.Helper()
		for _, w := range want {
			if diff := cmp.Diff(w, get(t, rdb, tenant, w.JobID), ignoreTimes); diff != "" {
				t.Errorf("%s: record of %s (-want +got):\n%s", step, w.JobID, diff)
			}
		}
	}
	check("enqueued", rec("a", "queued", 0, 1, 0, "", ""), rec("b", "queued", 0, 2, 1, "", ""),
		rec("c", "queued", 0, 3, 2, "", ""), rec("d", "queued", 0, 4, 3, "", ""), rec("e", "queued", 0, 5, 4, "", ""))
	if r := get(t, rdb, tenant, "a"); !r.UpdatedAt.Equal(t0) {
		t.Errorf("updated_at of a queued job = %v, want its enqueued_at %v", r.UpdatedAt, t0)
	}

	c := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: time.Minute}))
	a := claim(t, c, tenant)
	check("a claimed, not yet sent: still queued, still first", rec("a", "queued", 0, 1, 0, "", ""))
	if !start(t, rdb, a) {
		t.Fatal("Start(a) = false, want true")
	}
	check("a in flight", rec("a", "in_flight", 1, 1, -1, "", ""), rec("b", "queued", 0, 2, 0, "", ""), rec("d", "queued", 0, 4, 2, "", ""))

	var conflict *jobstate.ConflictError
	if err := jobstate.Cancel(ctx, rdb, tenant, "a"); !errors.As(err, &conflict) || conflict.State != "in_flight" {
		t.Errorf("Cancel(in-flight a) = %v, want a ConflictError naming in_flight", err)
	}
	next := a.Envelope
	next.Attempt++
	if err := c.Defer(ctx, a, queue.Retry{Delay: time.Hour, Next: next, LastError: "drainer: downstream answered 500"}); err != nil {
		t.Fatal(err)
	}
	check("a deferred", rec("a", "retrying", 1, 1, -1, "drainer: downstream answered 500", ""))

	if err := jobstate.Cancel(ctx, rdb, tenant, "c"); err != nil {
		t.Fatalf("Cancel(queued c) = %v, want nil", err)
	}
	check("c cancelled", rec("c", "cancelled", 0, 3, -1, "", ""))
	if err := jobstate.Cancel(ctx, rdb, tenant, "c"); !errors.As(err, &conflict) || conflict.State != "cancelled" {
		t.Errorf("Cancel(cancelled c) = %v, want a ConflictError naming cancelled", err)
	}

	b := claim(t, c, tenant)
	if !start(t, rdb, b) {
		t.Fatal("Start(b) = false")
	}
	if err := c.Finish(ctx, b, queue.Outcome{}); err != nil {
		t.Fatal(err)
	}
	check("b done", rec("b", "done", 1, 2, -1, "", ""), rec("d", "queued", 0, 4, 1, "", ""))

	cj := claim(t, c, tenant)
	if cj.Envelope.ID != "c" || !cj.Cancelled {
		t.Fatalf("claimed %s cancelled=%v, want c cancelled", cj.Envelope.ID, cj.Cancelled)
	}
	if err := c.Finish(ctx, cj, queue.Outcome{Dropped: jobstate.Cancelled}); err != nil {
		t.Fatal(err)
	}
	check("c dropped: the dispatched sequence passes it", rec("c", "cancelled", 0, 3, -1, "", ""), rec("d", "queued", 0, 4, 0, "", ""))

	d := claim(t, c, tenant)
	if err := jobstate.Cancel(ctx, rdb, tenant, "d"); err != nil {
		t.Fatalf("Cancel(d, claimed but not started) = %v, want nil", err)
	}
	if start(t, rdb, d) {
		t.Error("Start(d cancelled after its claim) = true, want false")
	}
	check("d not started", rec("d", "cancelled", 0, 4, -1, "", ""), rec("e", "queued", 0, 5, 1, "", ""))
	if err := c.Finish(ctx, d, queue.Outcome{Dropped: jobstate.Cancelled}); err != nil {
		t.Fatal(err)
	}
	check("d dropped", rec("d", "cancelled", 0, 4, -1, "", ""), rec("e", "queued", 0, 5, 0, "", ""))

	e := claim(t, c, tenant)
	if !start(t, rdb, e) {
		t.Fatal("Start(e) = false")
	}
	if err := c.Finish(ctx, e, queue.Outcome{Dead: &queue.DeadLetter{Reason: "rejected", Error: "422 Unprocessable Entity", Attempts: 1}}); err != nil {
		t.Fatal(err)
	}
	check("e dead", rec("e", "dead", 1, 5, -1, "422 Unprocessable Entity", "rejected"))

	if n, _ := rdb.ZCard(ctx, keys.Delivering(tenant)).Result(); n != 0 {
		t.Errorf("deliveries in progress after every delivery settled = %d, want 0", n)
	}
	if got, _ := rdb.Get(ctx, keys.JobsDispatched(tenant)).Int64(); got != 5 {
		t.Errorf("dispatched sequence = %d, want 5", got)
	}
	for _, k := range []string{keys.JobState(tenant, "a"), keys.JobSeq(tenant), keys.JobsDispatched(tenant)} {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 || ttl > keys.JobStateTTL {
			t.Errorf("PTTL %s = %v, want in (0, %v]", k, ttl, keys.JobStateTTL)
		}
	}
}

func TestNotFoundAndOlderMarker(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "js")
	if _, err := jobstate.Get(ctx, rdb, tenant, "nope"); !errors.Is(err, jobstate.ErrNotFound) {
		t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
	}
	if err := jobstate.Cancel(ctx, rdb, tenant, "nope"); !errors.Is(err, jobstate.ErrNotFound) {
		t.Errorf("Cancel(unknown) = %v, want ErrNotFound", err)
	}
	if rdb.Exists(ctx, keys.JobState(tenant, "nope")).Val() != 0 {
		t.Error("Cancel(unknown) created a state key")
	}
	rdb.Set(ctx, keys.JobState(tenant, "old"), "cancelled", time.Minute)
	if r := get(t, rdb, tenant, "old"); r.State != jobstate.Cancelled {
		t.Errorf("Get(string marker) state = %q, want cancelled", r.State)
	}
	var conflict *jobstate.ConflictError
	if err := jobstate.Cancel(ctx, rdb, tenant, "old"); !errors.As(err, &conflict) || conflict.State != "cancelled" {
		t.Errorf("Cancel(string marker) = %v, want a ConflictError naming cancelled", err)
	}
	ok, err := startRun(ctx, rdb, jobstate.Dispatch{Tenant: tenant, JobID: "old", Member: "old|x", Attempt: 1, Lease: time.Second})
	if err != nil || ok {
		t.Errorf("Start(string marker) = %v, %v; want false, nil", ok, err)
	}
	rdb.Set(ctx, keys.JobState(tenant, "other"), "something", time.Minute)
	if _, err := jobstate.Get(ctx, rdb, tenant, "other"); !errors.Is(err, jobstate.ErrNotFound) {
		t.Errorf("Get(a string that is not the marker) = %v, want ErrNotFound", err)
	}
}

// TestStartOutflowAndDeliveries: Start keeps a delivery in flight until its
// deadline; the drainer's outflow flush (OutflowAdd) adds the units to
// their seconds, drops deliveries whose deadline passed and trims outflow
// seconds older than OutflowTTL.
func TestStartOutflowAndDeliveries(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "js")
	base := time.UnixMilli(1_800_000_000_000)
	for i := range 70 {
		_, err := startRun(ctx, rdb, jobstate.Dispatch{Tenant: tenant, JobID: fmt.Sprint(i), Member: fmt.Sprintf("%d|x", i),
			Attempt: 1, Lease: 1500 * time.Millisecond, Now: base.Add(time.Duration(i) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		at := base.Add(time.Duration(i) * time.Second)
		add := jobstate.OutflowAdd{Tenant: tenant, Units: map[int64]int64{at.Unix(): 2}, Now: at}
		if n, err := jobstate.OutflowAddReply(add.Call().Run(ctx, rdb).Val()); err != nil || n != 1 {
			t.Fatalf("outflow flush: %d, %v", n, err)
		}
	}
	last := base.Add(69 * time.Second)
	h, err := rdb.HGetAll(ctx, keys.Outflow(tenant)).Result()
	if err != nil {
		t.Fatal(err)
	}
	keep := int64(keys.OutflowTTL / time.Second)
	for f, v := range h {
		var sec int64
		fmt.Sscan(f, &sec)
		if sec <= last.Unix()-keep {
			t.Errorf("outflow second %s (value %s) kept, want seconds older than %ds trimmed", f, v, keep)
		}
		if v != "2" {
			t.Errorf("outflow second %s = %s, want 2 (one job of cost 2)", f, v)
		}
	}
	if v := h[fmt.Sprint(last.Unix())]; v != "2" {
		t.Errorf("outflow of the last second = %q, want 2", v)
	}
	members, err := rdb.ZRangeWithScores(ctx, keys.Delivering(tenant), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range members {
		got = append(got, fmt.Sprintf("%v@%d", m.Member, int64(m.Score)-base.UnixMilli()))
	}
	// Each delivery lasts 1.5 s; at the last start, the one started a
	// second before is still in flight, older ones are dropped.
	if diff := cmp.Diff([]string{"68|x@69500", "69|x@70500"}, got); diff != "" {
		t.Errorf("deliveries in progress (-want +got):\n%s", diff)
	}
}

func TestOwners(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	a, b, c := testenv.Name(t, "js"), testenv.Name(t, "js"), testenv.Name(t, "js")
	enqueue(t, rdb, a, "shared", "only-a")
	enqueue(t, rdb, b, "shared")
	got, err := jobstate.Owners(context.Background(), rdb, []string{a, b, c}, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{a, b}, got); diff != "" {
		t.Errorf("Owners(shared) (-want +got):\n%s", diff)
	}
}

// TestCluster runs enqueue, Get, Start, Cancel and settle on the 3-master
// Redis Cluster: every key of a tenant shares its hash tag.
func TestCluster(t *testing.T) {
	t.Parallel()
	rdb := testenv.Cluster(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "jsc")
	enqueue(t, rdb, tenant, "x", "y")
	c := mustRedisConsumer(redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: time.Minute}))
	x := claim(t, c, tenant)
	if !start(t, rdb, x) {
		t.Fatal("Start(x) = false")
	}
	if err := jobstate.Cancel(ctx, rdb, tenant, "y"); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, x, queue.Outcome{}); err != nil {
		t.Fatal(err)
	}
	if s := get(t, rdb, tenant, "x").State; s != "done" {
		t.Errorf("x = %s, want done", s)
	}
	if s := get(t, rdb, tenant, "y").State; s != "cancelled" {
		t.Errorf("y = %s, want cancelled", s)
	}
}
