package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// TestScriptRepliesChecked: every twin's parser refuses a reply of the
// wrong shape or type with an error wrapping lua.ErrReply naming its
// script, and accepts the right one.
func TestScriptRepliesChecked(t *testing.T) {
	t.Parallel()
	parsers := []struct {
		script string
		parse  func(any) error
		good   any
		bad    []any
	}{
		{"schedule_add.lua", func(v any) error { _, _, err := parseAdd(v); return err },
			[]any{int64(1), int64(5)}, []any{int64(1), []any{int64(2), int64(1)}, []any{"1", int64(1)}}},
		{"schedule_take.lua", func(v any) error { _, err := parseTake(v); return err },
			[]any{int64(1), int64(-1), int64(0), "a", "{}"},
			[]any{nil, []any{int64(1), int64(-1)}, []any{int64(1), int64(-1), int64(0), "a"}, []any{int64(1), "x", int64(0)}, []any{int64(1), int64(-1), int64(0), int64(2), "{}"}}},
		{"schedule_done.lua", func(v any) error { _, _, err := parseDone(v); return err },
			[]any{int64(1), int64(-1)}, []any{int64(1), []any{int64(-1), int64(0)}, []any{"1", int64(0)}}},
		{"schedule_cancel.lua", func(v any) error { _, _, err := parseCancel(v); return err },
			[]any{int64(1), "scheduled"}, []any{int64(1), []any{int64(2), ""}, []any{int64(0), int64(0)}}},
		{"schedule_due.lua", func(v any) error { _, err := parseDue(v); return err },
			[]any{"acme"}, []any{int64(1), []any{int64(1)}}},
	}
	for _, p := range parsers {
		if err := p.parse(p.good); err != nil {
			t.Errorf("%s: reply %#v = %v, want nil", p.script, p.good, err)
		}
		for _, v := range p.bad {
			err := p.parse(v)
			if !errors.Is(err, lua.ErrReply) || !strings.Contains(err.Error(), p.script) {
				t.Errorf("%s: reply %#v = %v, want an error wrapping lua.ErrReply naming the script", p.script, v, err)
			}
		}
	}
}

// job returns a scheduled job of tenant due at due.
func job(tenant, id string, due time.Time) Job {
	return Job{Due: due, Envelope: queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: tenant, Type: "t", Cost: 1,
		EnqueuedAt: time.Now(), NotBefore: &due}}
}

// scheduledTenant returns the shared Redis and a fresh tenant whose hint
// is removed when the test ends.
func scheduledTenant(t *testing.T, name string) (*redis.Client, string) {
	t.Helper()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, name)
	t.Cleanup(func() { rdb.ZRem(context.Background(), keys.ScheduledTenants(), tenant) })
	return rdb, tenant
}

// logged returns a scheduler on rdb at a 20-ms interval with its own
// registry, logging to the returned buffer.
func logged(t *testing.T, rdb redis.UniversalClient) (*Scheduler, *testenv.LogBuffer, *prometheus.Registry) {
	t.Helper()
	var buf testenv.LogBuffer
	reg := prometheus.NewRegistry()
	s, err := New(Config{Redis: rdb, Producer: &recorder{}, Interval: 20 * time.Millisecond, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s, &buf, reg
}

// runFor runs s over tenants until the returned stop is called.
func runFor(s *Scheduler, tenants ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func() []string { return tenants }, nil) }()
	return func() { cancel(); <-done }
}

// recorder is a Producer that keeps what it was given.
type recorder struct {
	mu   sync.Mutex
	jobs []queue.Envelope
	fail error
}

func (r *recorder) Enqueue(_ context.Context, jobs []queue.Envelope) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.jobs = append(r.jobs, jobs...)
	return nil
}

func (r *recorder) Close() error { return nil }

// producerFunc is a Producer of a function.
type producerFunc func(context.Context, []queue.Envelope) error

func (f producerFunc) Enqueue(ctx context.Context, jobs []queue.Envelope) error { return f(ctx, jobs) }
func (f producerFunc) Close() error                                             { return nil }

// TestAddBoundAndHint: Add stores up to max scheduled jobs per tenant
// (an id scheduled again is replaced, not counted twice), refuses beyond
// with a *FullError writing nothing, records state scheduled with due_at,
// and lowers the tenant's hint to its earliest due time.
func TestAddBoundAndHint(t *testing.T) {
	t.Parallel()
	rdb, tenant := scheduledTenant(t, "add")
	ctx := context.Background()
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := Add(ctx, rdb, tenant, []Job{job(tenant, "a", due), job(tenant, "b", due.Add(-time.Minute))}, 2); err != nil {
		t.Fatal(err)
	}
	if err := Add(ctx, rdb, tenant, []Job{job(tenant, "a", due)}, 2); err != nil {
		t.Errorf("re-adding a scheduled id at the bound: %v, want nil", err)
	}
	var full *FullError
	if err := Add(ctx, rdb, tenant, []Job{job(tenant, "c", due)}, 2); !errors.As(err, &full) || full.Count != 2 || full.Max != 2 {
		t.Errorf("third job over max 2: %v, want a FullError with count 2", err)
	}
	if ok, _ := rdb.HExists(ctx, keys.ScheduledJobs(tenant), "c").Result(); ok {
		t.Error("a refused job was stored")
	}
	h, _ := rdb.HGetAll(ctx, keys.JobState(tenant, "a")).Result()
	if h["state"] != "scheduled" || h["due_at"] != strconv.FormatInt(due.UnixMilli(), 10) {
		t.Errorf("state hash %v, want state scheduled, due_at %d", h, due.UnixMilli())
	}
	if s, err := rdb.ZScore(ctx, keys.ScheduledTenants(), tenant).Result(); err != nil || int64(s) != due.Add(-time.Minute).UnixMilli() {
		t.Errorf("hint %v (%v), want the earliest due %d", int64(s), err, due.Add(-time.Minute).UnixMilli())
	}
	if ttl, _ := rdb.PTTL(ctx, keys.JobState(tenant, "a")).Result(); ttl < time.Hour+keys.JobStateTTL-time.Minute {
		t.Errorf("state TTL %v, want at least the due time + JobStateTTL", ttl)
	}
}

// TestCancelDuringMove: a job cancelled while a scheduler moves it (taken,
// not yet done) is not taken again, and the end of the move cancels it
// again after its enqueue rewrote its state to queued.
func TestCancelDuringMove(t *testing.T) {
	t.Parallel()
	rdb, tenant := scheduledTenant(t, "mid")
	ctx := context.Background()
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	// The enqueue also indexes the job as queued (as enqueue.lua does
	// once job lists exist): the re-cancel takes it out of that index,
	// whose key the script builds from the state key's hash tag.
	indexed := producerFunc(func(ctx context.Context, jobs []queue.Envelope) error {
		if err := p.Enqueue(ctx, jobs); err != nil {
			return err
		}
		return rdb.ZAdd(ctx, keys.JobIndex(tenant, "queued"), redis.Z{Score: 1, Member: jobs[0].ID}).Err()
	})
	s, err := New(Config{Redis: rdb, Producer: indexed, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := Add(ctx, rdb, tenant, []Job{job(tenant, "x", time.Now().Add(20*time.Millisecond))}, 10); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	r, err := s.take(ctx, tenant, 10)
	if err != nil || len(r.Jobs) != 1 {
		t.Fatalf("take = %+v, %v; want the due job", r, err)
	}
	if ok, _, err := Cancel(ctx, rdb, tenant, "x"); err != nil || !ok {
		t.Fatalf("Cancel during the move = %v, %v; want cancelled", ok, err)
	}
	if _, _, err := s.enqueue(ctx, tenant, r.Jobs); err != nil {
		t.Fatal(err)
	}
	rec, err := jobstate.Get(ctx, rdb, tenant, "x")
	if err != nil || rec.State != jobstate.Cancelled {
		t.Errorf("state after the move %q (%v), want cancelled", rec.State, err)
	}
	if err := rdb.ZScore(ctx, keys.JobIndex(tenant, "queued"), "x").Err(); err != redis.Nil {
		t.Errorf("the re-cancelled job is still in the queued index (%v)", err)
	}
	time.Sleep(1100 * time.Millisecond) // past the move lease
	if r, _ := s.take(ctx, tenant, 10); len(r.Jobs) != 0 || r.NextMS != -1 {
		t.Errorf("take after the move = %+v, want nothing left", r)
	}
}

// TestMoveRetriesAfterEnqueueFailure: a move whose Enqueue fails keeps its
// jobs leased; after the lease another take hands them out again.
func TestMoveRetriesAfterEnqueueFailure(t *testing.T) {
	t.Parallel()
	rdb, tenant := scheduledTenant(t, "retry")
	ctx := context.Background()
	prod := &recorder{fail: queue.Unavailable("enqueue", errors.New("down"))}
	s, err := New(Config{Redis: rdb, Producer: prod, Lease: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := Add(ctx, rdb, tenant, []Job{job(tenant, "y", time.Now())}, 10); err != nil {
		t.Fatal(err)
	}
	s.move(ctx, tenant)
	prod.mu.Lock()
	prod.fail = nil
	prod.mu.Unlock()
	s.move(ctx, tenant) // within the lease: nothing to take
	if len(prod.jobs) != 0 {
		t.Fatalf("moved %d jobs within the failed move's lease, want 0", len(prod.jobs))
	}
	time.Sleep(400 * time.Millisecond)
	s.move(ctx, tenant)
	if len(prod.jobs) != 1 || prod.jobs[0].ID != "y" {
		t.Fatalf("moved %+v after the lease, want job y", prod.jobs)
	}
	if n, _ := rdb.HLen(ctx, keys.ScheduledJobs(tenant)).Result(); n != 0 {
		t.Errorf("scheduled hash holds %d after the move, want 0", n)
	}
}

// TestSweepRepairsLostHint: a tenant whose hint was lost is found by the
// sweep of the configured tenants, and Run then moves its due job.
func TestSweepRepairsLostHint(t *testing.T) {
	t.Parallel()
	rdb, tenant := scheduledTenant(t, "lost")
	ctx := context.Background()
	if err := Add(ctx, rdb, tenant, []Job{job(tenant, "z", time.Now())}, 10); err != nil {
		t.Fatal(err)
	}
	rdb.ZRem(ctx, keys.ScheduledTenants(), tenant)
	prod := &recorder{}
	reg := prometheus.NewRegistry()
	s, err := New(Config{Redis: rdb, Producer: prod, Interval: 20 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer runFor(s, tenant)()
	testenv.WaitFor(t, 2*time.Second, "the job moved", func() bool {
		prod.mu.Lock()
		defer prod.mu.Unlock()
		return len(prod.jobs) == 1
	})
	testenv.WaitFor(t, time.Second, "the hint removed", func() bool {
		return rdb.ZScore(ctx, keys.ScheduledTenants(), tenant).Err() != nil
	})
	if v := testenv.MetricValue(t, reg, "sluice_scheduled_moved_total", map[string]string{"tenant": tenant}); v != 1 {
		t.Errorf("sluice_scheduled_moved_total = %v, want 1", v)
	}
	if v, ok := testenv.Metric(t, reg, "sluice_jobs_scheduled", map[string]string{"tenant": tenant}); !ok || v != 0 {
		t.Errorf("sluice_jobs_scheduled = %v (%v), want 0 after the move", v, ok)
	}
}

// TestScriptsRefuseBadArguments: each scheduling script checks its
// arguments before its first write, so a malformed call is an error that
// writes nothing.
func TestScriptsRefuseBadArguments(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "bad")
	idx, hash, sk := keys.JobIndex(tenant, "scheduled"), keys.ScheduledJobs(tenant), keys.JobState(tenant, "a")
	for _, c := range []lua.Call{
		{Script: lua.ScheduleAdd, Keys: []string{idx, hash, sk}, Args: []any{10, 1000, "a", "soon", "{}", "t", 1, 0}},
		{Script: lua.ScheduleAdd, Keys: []string{idx, hash, sk}, Args: []any{0, 1000, "a", 5, "{}", "t", 1, 0}},
		{Script: lua.ScheduleTake, Keys: []string{idx, hash, keys.ScheduledMoving(tenant)}, Args: []any{0, 5, 0, 1000, keys.JobState(tenant, "")}},
		{Script: lua.ScheduleDone, Keys: []string{hash, keys.ScheduledMoving(tenant), idx, sk}, Args: []any{1000, "a", "x", 0}},
	} {
		if err := c.Run(ctx, rdb).Err(); err == nil || !strings.Contains(err.Error(), "ERR schedule_") {
			t.Errorf("%s %v: %v, want its own ERR", c.Script.Name(), c.Args, err)
		}
	}
	if n := rdb.Exists(ctx, idx, hash, sk).Val(); n != 0 {
		t.Errorf("%d keys written by refused calls, want 0", n)
	}
}

// TestRedisDownLoggedOnce: with its Redis stopped, the scheduler's due
// check fails on every tick; each failure is counted, and logged once per
// failLogEvery, not on every tick.
func TestRedisDownLoggedOnce(t *testing.T) {
	t.Parallel()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	proc.Stop()
	s, buf, reg := logged(t, rdb)
	stop := runFor(s)
	// go-redis spaces its dials to a server that refuses them, so a failed
	// check takes longer than Interval; three are enough.
	testenv.WaitFor(t, 8*time.Second, "three failed due checks counted", func() bool {
		return testenv.MetricValue(t, reg, "sluice_scheduler_errors_total", map[string]string{"op": "due"}) >= 3
	})
	stop()
	if n := strings.Count(buf.String(), `msg="scheduler: due"`); n != 1 {
		t.Errorf("logged %d due failures in under failLogEvery, want 1:\n%s", n, buf.String())
	}
}

// TestUndecodableJobLoggedEach: a scheduled job whose stored envelope does
// not decode is dead-lettered when due (state dead, reason poison, its
// letter in the DLQ with the job as stored); each one is logged at Error
// with its id (not quieted) and counted.
func TestUndecodableJobLoggedEach(t *testing.T) {
	t.Parallel()
	rdb, tenant := scheduledTenant(t, "poison")
	ctx := context.Background()
	now := time.Now()
	if err := Add(ctx, rdb, tenant, []Job{job(tenant, "p1", now), job(tenant, "p2", now)}, 10); err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, keys.ScheduledJobs(tenant), "p1", "not json", "p2", `{"v":1}`)
	s, buf, reg := logged(t, rdb)
	stop := runFor(s, tenant)
	testenv.WaitFor(t, 5*time.Second, "both counted", func() bool {
		return testenv.MetricValue(t, reg, "sluice_scheduler_errors_total", map[string]string{"op": "decode"}) == 2
	})
	stop()
	for _, id := range []string{"p1", "p2"} {
		if !strings.Contains(buf.String(), `level=ERROR msg="scheduler: scheduled job cannot go onto the queue; dead-lettered" tenant=`+tenant+` job_id=`+id) {
			t.Errorf("no error line for %s:\n%s", id, buf.String())
		}
		// Each is dead, its letter in the DLQ with the job as stored: not
		// "queued" with nothing on the queue.
		if rec, err := jobstate.Get(ctx, rdb, tenant, id); err != nil || rec.State != jobstate.Dead || rec.Reason != "poison" {
			t.Errorf("%s after its move: %+v (%v), want dead, reason poison", id, rec, err)
		}
		if letter := rdb.HGet(ctx, keys.DeadRecords(tenant), id).Val(); !strings.Contains(letter, `"reason":"poison"`) {
			t.Errorf("%s's dead letter %q, want one with reason poison", id, letter)
		}
	}
	if n := rdb.ZCard(ctx, keys.JobIndex(tenant, "dead")).Val(); n != 2 {
		t.Errorf("dead index holds %d jobs, want 2", n)
	}
	t.Cleanup(func() {
		rdb.Del(context.Background(), keys.DeadRecords(tenant), keys.JobIndex(tenant, "dead"), keys.JobState(tenant, "p1"), keys.JobState(tenant, "p2"))
	})
}
