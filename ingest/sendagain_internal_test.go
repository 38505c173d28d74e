package ingest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// TestReleaseSentAgainAfterBlip: a release of a request's reservations
// that gets no reply (Redis frozen) is sent again once Redis answers and
// deletes the request's own marker, not the marker of another request
// holding another id. Before, the marker held the id for pendingTTL: a
// client retrying after a sub-second blip got 409 "in progress" for a
// minute (a hostile probe: 19-40 ids per blip).
func TestReleaseSentAgainAfterBlip(t *testing.T) {
	t.Parallel()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr(), MaxRetries: -1,
		ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond, DialTimeout: 250 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	s := &Server{rdb: rdb}
	s.snap.Store(&snapshot{redisTimeout: 250 * time.Millisecond})
	ctx := context.Background()
	ours, theirs := newMarker(), newMarker()
	if res, err := reserve(ctx, rdb, "acme", []string{"a"}, ours); err != nil || res[0].state != idemReserved {
		t.Fatalf("reserve: %v %v", res, err)
	}
	rdb.Set(ctx, keys.Idempotency("acme", "b"), theirs, time.Minute)
	proc.Pause()
	rctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	err := release(rctx, rdb, "acme", []string{"a", "b"}, ours)
	cancel()
	if err == nil {
		t.Fatal("release with Redis frozen answered")
	}
	s.sendAgain(err, func(ctx context.Context) error { return release(ctx, rdb, "acme", []string{"a", "b"}, ours) })
	time.Sleep(700 * time.Millisecond)
	proc.Resume()
	testenv.WaitFor(t, 3*time.Second, "the marker released once Redis answers", func() bool {
		return rdb.Exists(ctx, keys.Idempotency("acme", "a")).Val() == 0
	})
	if v := rdb.Get(ctx, keys.Idempotency("acme", "b")).Val(); v != theirs {
		t.Errorf("another request's marker reads %q after the release, want it kept (%q)", v, theirs)
	}
}

// TestUnknownDetailPromisesOnlyWhatHolds: a 503 of an unknown outcome says
// a retry with the same id queues the job at most once only when every
// fresh job's id is reserved: not for a fail-open request that went on
// without its reservations, nor for a job sent without an id.
func TestUnknownDetailPromisesOnlyWhatHolds(t *testing.T) {
	snap := &snapshot{backend: "redis"}
	unknown := func() *problem {
		return enqueueProblem(snap, "acme", fmt.Errorf("x: %w: %w", queue.ErrUnavailable, queue.ErrUnknownOutcome))
	}
	withID := []job{{id: "a"}}
	for _, c := range []struct {
		name string
		jobs []job
		sub  *submission
		want string
	}{
		{"ids reserved", withID, &submission{fresh: []int{0}}, "queues it at most once"},
		{"reservation skipped (fail open)", withID, &submission{fresh: []int{0}, unreserved: true}, "may queue it again"},
		{"a job without an id", []job{{id: "a"}, {}}, &submission{fresh: []int{0, 1}}, "without an id may queue it again"},
	} {
		if p := unknownDetail(unknown(), snap, c.jobs, c.sub); !strings.Contains(p.Detail, c.want) {
			t.Errorf("%s: detail %q, want it to say %q", c.name, p.Detail, c.want)
		}
	}
}

// TestUnknownSentAgainKeepsNewerAnswers: an unknown record sent again
// (its first send's reply lost) is written only where this request's
// marker still is: an id whose record a later request took and answered
// 202 meanwhile keeps that answer. Before, the resend was a plain SET over
// it, and the next request with the id queued the job again.
func TestUnknownSentAgainKeepsNewerAnswers(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "mark")
	marker := newMarker()
	rdb.Set(ctx, keys.Idempotency(tenant, "a"), marker, time.Minute)
	answered := `{"status":202,"answer":{"job_id":"b"}}`
	rdb.Set(ctx, keys.Idempotency(tenant, "b"), answered, time.Minute)
	// c: an id this request held for its retry (its held record).
	held := unknownRecord{Status: unknownStatus, JobID: "c", EnqueuedAt: time.Now(), HeldUntil: time.Now().Add(time.Minute).UnixMilli()}.encode()
	rdb.Set(ctx, keys.Idempotency(tenant, "c"), held, time.Minute)
	recs := []unknownRecord{{Status: unknownStatus, JobID: "a", EnqueuedAt: time.Now()}, {Status: unknownStatus, JobID: "b", EnqueuedAt: time.Now()},
		{Status: unknownStatus, JobID: "c", EnqueuedAt: time.Now()}}
	if err := markUnknown(ctx, rdb, tenant, recs, []string{marker, marker, held}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "c"} {
		if v := rdb.Get(ctx, keys.Idempotency(tenant, id)).Val(); !strings.Contains(v, `"status":503`) || strings.Contains(v, "held_until") {
			t.Errorf("id %s (held by this request) reads %q, want its free unknown record", id, v)
		}
	}
	if v := rdb.Get(ctx, keys.Idempotency(tenant, "b")).Val(); v != answered {
		t.Errorf("id b (a later request's 202) reads %q, want it kept", v)
	}
	t.Cleanup(func() { testenv.DeleteTenant(t, rdb, tenant) })
}
