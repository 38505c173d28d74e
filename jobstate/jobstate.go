// Package jobstate records and reads the state of every job, for the
// visibility API (GET /v1/jobs/{id}, GET /v1/jobs, GET
// /v1/tenants/{id}/stats), the cancel API (DELETE /v1/jobs/{id}) and the
// purge.
//
// A job's state is a Redis hash, keys.JobState(tenant, id), with the fields
// state, type, attempt, enqueued_at, updated_at (unix ms), seq, last_error
// and reason, kept for keys.JobStateTTL after its last change (on Kafka
// also start_enqueued_at: the envelope's enqueued_at as a drainer's start
// saw it before the producer's post-ack write recorded enqueued_at, so a
// copy of a done job is known as one meanwhile; and start_part,
// "<partition>@<enqueued_at>" of the copy whose delivery started, so a copy
// in another partition is not started while that one is in flight or
// retrying). It is
// written on round trips that happen anyway where it can be:
//
//	queued     enqueue.lua (Redis backend), or the Kafka producer's
//	           post-ack pipeline (job_state_enqueue.lua)
//	in_flight  job_state_dispatch.lua, when a drainer starts a delivery
//	retrying   lease_defer.lua (Redis) or job_state_settle.lua (Kafka)
//	done, dead, cancelled, expired
//	           ack.lua (Redis) or job_state_settle.lua (Kafka)
//	cancelled  job_state_cancel.lua, from queued or retrying only, and
//	           purge.lua (reason purged)
//
// Each of these writes also moves the job's id between the tenant's
// indexes keys.JobIndex (queued, in_flight, retrying, done; dead and
// scheduled are written by their own parts), which List pages through
// (GET /v1/jobs); Purge cancels every waiting job of a tenant (POST
// /admin/v1/tenants/{id}/queue:purge).
//
// Queue position: each tenant numbers its jobs in enqueue order (seq, from
// keys.JobSeq), and keys.JobsDispatched holds the highest seq that has left
// the head of the queue (dispatched or dropped). A queued job has
// seq − dispatched − 1 jobs ahead of it. It is an estimate: a retry goes
// back ahead of it without a new seq, a cancelled job ahead of it still
// counts until it is dropped, and jobs enqueued before this package existed
// have no seq. docs/adr/0009-job-states.md records the choices.
package jobstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// The states of a job.
const (
	// Queued: waiting in its tenant's queue.
	Queued = "queued"
	// InFlight: a drainer is delivering it.
	InFlight = "in_flight"
	// Retrying: a delivery failed; it waits for its retry time.
	Retrying = "retrying"
	// Done: delivered.
	Done = "done"
	// Dead: in the dead-letter queue (Reason says why).
	Dead = "dead"
	// Cancelled: cancelled while waiting; dropped unsent.
	Cancelled = "cancelled"
	// Expired: its deadline passed while it waited; dropped unsent.
	Expired = "expired"
	// Scheduled: waiting for its due time, not yet in its queue (its index
	// is written by the scheduler).
	Scheduled = "scheduled"
)

// ErrNotFound is returned for a job with no recorded state: an unknown id,
// another tenant's job, or one whose state expired (keys.JobStateTTL).
var ErrNotFound = errors.New("jobstate: no such job")

// Record is a job's recorded state.
type Record struct {
	JobID  string
	Tenant string
	// Type is the job type ("" when not recorded yet).
	Type string
	// State is one of the state constants.
	State string
	// Attempt is the Sluice-Attempt of the last delivery started (0 while
	// the job has never been sent).
	Attempt int
	// EnqueuedAt and UpdatedAt are zero when not recorded.
	EnqueuedAt time.Time
	UpdatedAt  time.Time
	// Seq is the job's number in its tenant's enqueue sequence (0: none).
	Seq int64
	// LastError is the last failed delivery's error.
	LastError string
	// Reason says why a dead job is dead: rejected, attempts_exhausted,
	// poison or cost_exceeds_capacity; or why a job was dropped:
	// ReasonPurged for a cancelled one a purge cancelled.
	Reason string
	// DueAt is a scheduled job's due time (zero: not scheduled).
	DueAt time.Time
	// Heartbeat is a heartbeat job's interval (0: none), BeatAt its last
	// poll (zero: none yet).
	Heartbeat time.Duration
	BeatAt    time.Time
	// Ahead is how many of the tenant's jobs are ahead of this one in its
	// queue (0: next to leave), for a queued job with a Seq; -1 otherwise.
	Ahead int64
}

// Get reads tenant's job id in one pipelined round trip (its hash and the
// tenant's dispatched sequence). It returns ErrNotFound when no state is
// recorded; other errors are Redis failures.
func Get(ctx context.Context, rdb redis.UniversalClient, tenant, id string) (Record, error) {
	rec, _, err := GetWith(ctx, rdb, tenant, id, nil)
	return rec, err
}

// GetWith is Get with the script call with (when not nil) sent in the same
// round trip (the visibility API's heartbeat read, lua/job_beat.lua); it
// returns that call's command too, whose reply the caller checks.
func GetWith(ctx context.Context, rdb redis.UniversalClient, tenant, id string, with *lua.Call) (Record, *redis.Cmd, error) {
	sk := keys.JobState(tenant, id)
	var all *redis.MapStringStringCmd
	var gone *redis.StringCmd
	read := func(p redis.Pipeliner) {
		all = p.HGetAll(ctx, sk)
		gone = p.Get(ctx, keys.JobsDispatched(tenant))
	}
	var extra *redis.Cmd
	if with != nil {
		extra = lua.Exec(ctx, rdb, []lua.Call{*with}, read)[0]
	} else {
		_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error { read(p); return nil })
	}
	rec, err := recordOf(ctx, rdb, tenant, id, all, gone)
	return rec, extra, err
}

// recordOf is Get's reading of the job's hash and the dispatched sequence.
func recordOf(ctx context.Context, rdb redis.UniversalClient, tenant, id string, all *redis.MapStringStringCmd, gone *redis.StringCmd) (Record, error) {
	sk := keys.JobState(tenant, id)
	rec := Record{JobID: id, Tenant: tenant, Ahead: -1}
	if isWrongType(all.Err()) {
		// The older marker: the string "cancelled".
		v, err := rdb.Get(ctx, sk).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return rec, ErrNotFound
		case err != nil:
			return rec, fmt.Errorf("jobstate: get %s of %s: %w", id, tenant, err)
		case v != Cancelled:
			return rec, ErrNotFound
		}
		rec.State = Cancelled
		return rec, nil
	}
	for _, err := range []error{all.Err(), gone.Err()} {
		if err != nil && !errors.Is(err, redis.Nil) {
			return rec, fmt.Errorf("jobstate: get %s of %s: %w", id, tenant, err)
		}
	}
	h := all.Val()
	if h["state"] == "" {
		return rec, ErrNotFound
	}
	rec.fill(h)
	if rec.State == Queued && rec.Seq > 0 {
		// A negative or unreadable counter is 0, so Seq − d − 1 cannot wrap.
		d, _ := strconv.ParseInt(gone.Val(), 10, 64)
		rec.Ahead = max(0, rec.Seq-max(d, 0)-1)
	}
	return rec, nil
}

// fill copies the hash's fields into r.
func (r *Record) fill(h map[string]string) {
	r.State = h["state"]
	r.Type = h["type"]
	r.Attempt, _ = strconv.Atoi(h["attempt"])
	r.EnqueuedAt = fromMS(h["enqueued_at"])
	r.UpdatedAt = fromMS(h["updated_at"])
	r.Seq, _ = strconv.ParseInt(h["seq"], 10, 64)
	r.LastError = h["last_error"]
	r.Reason = h["reason"]
	r.DueAt = fromMS(h["due_at"])
	if ms, err := strconv.ParseInt(h["heartbeat_ms"], 10, 64); err == nil && ms > 0 {
		r.Heartbeat = time.Duration(ms) * time.Millisecond
	}
	r.BeatAt = fromMS(h["beat_at"])
}

// fromMS parses unix milliseconds; "" or junk is the zero time.
func fromMS(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// isWrongType reports whether err is Redis' WRONGTYPE error.
func isWrongType(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE")
}

// Owners returns which of tenants have a job with this id (one EXISTS per
// tenant, pipelined), for an admin who asks about a job without naming its
// tenant.
func Owners(ctx context.Context, rdb redis.UniversalClient, tenants []string, id string) ([]string, error) {
	cmds := make([]*redis.IntCmd, len(tenants))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range tenants {
			cmds[i] = p.Exists(ctx, keys.JobState(t, id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("jobstate: find job %s: %w", id, err)
	}
	var out []string
	for i, c := range cmds {
		if c.Val() > 0 {
			out = append(out, tenants[i])
		}
	}
	return out, nil
}
