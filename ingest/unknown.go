package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// Client ids whose enqueue outcome is unknown.
//
// When the queue backend cannot say whether it stored a job (a produce
// request sent but not acknowledged in time, a Redis script sent but not
// answered: queue.ErrUnknownOutcome), the request is answered 503 +
// Retry-After as any enqueue failure, but the job's client id is not
// released: its record (keys.Idempotency, for keys.IdempotencyTTL) becomes
// an unknownRecord holding the job's id, its enqueued_at and a digest of
// what the request asked for. A retry with the same id and the same job
// (type, payload, cost, deadline, heartbeat; digestOf) enqueues that job
// again with the same id and enqueued_at, without a second admission (it
// was admitted the first time), and answers 202 with it, storing the answer
// as for any 202. The backends make the second enqueue harmless: the Redis
// one skips a job already recorded with that enqueued_at (enqueue.lua), and
// a drainer settles a Kafka copy of a job already done (or claimed) unsent,
// so the job reaches its sink once. A retry with another job under the id is
// a 422 naming the id: the id belongs to a job that may be queued. While a
// retry is on its way, the record is held (held_until, pendingTTL ahead):
// another request with the id is a 409, as with a pending first request; a
// retrier that dies leaves the hold to lapse.

// unknownStatus marks a stored record as an unknown outcome (a 202 is an
// answer).
const unknownStatus = http.StatusServiceUnavailable

// unknownRecord is the stored value of a client id whose enqueue outcome is
// unknown.
type unknownRecord struct {
	Status     int       `json:"status"` // unknownStatus
	JobID      string    `json:"job_id"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	Digest     string    `json:"digest"`
	// HeldUntil (unix ms) is when the hold of a retry in progress lapses;
	// 0 or past: the id is free to retry.
	HeldUntil int64 `json:"held_until,omitempty"`
}

// digestOf sums what a job asks for, so a retry can be told apart from
// another job under the same id: type, payload (compacted JSON), cost,
// deadline, heartbeat, and its not_before or delay as sent (not whether it
// is still ahead: a retry after the due time is the same job). The client
// id and the times derived from "now" are left out. A job with neither sums
// as before they were part of it.
func digestOf(j job) string {
	h := sha256.New()
	var b bytes.Buffer
	if json.Compact(&b, j.payload) != nil {
		b.Reset()
		b.Write(j.payload)
	}
	var deadline int64
	if j.deadline != nil {
		deadline = j.deadline.UnixNano()
	}
	timing := j.timing
	if timing == "" {
		timing = "false" // the sum of an ordinary job, unchanged
	}
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00%s\x00", j.typ, j.cost, deadline, j.heartbeat.Milliseconds(), timing)
	h.Write(b.Bytes())
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// parseUnknown reads a stored value as an unknownRecord; ok is false when it
// is not one.
func parseUnknown(val string) (unknownRecord, bool) {
	var r unknownRecord
	if json.Unmarshal([]byte(val), &r) != nil || r.Status != unknownStatus || r.JobID == "" || r.EnqueuedAt.IsZero() {
		return unknownRecord{}, false
	}
	return r, true
}

// encode returns r as its stored value.
func (r unknownRecord) encode() string {
	b, _ := json.Marshal(r) // strings, ints and a time: cannot fail
	return string(b)
}

// takeUnknown holds the record raw (as read) of tenant's id for a retry
// until now + pendingTTL, unless another request changed it meanwhile
// (lua/idempotency_take.lua, one round trip): ok reports it was taken, and
// held is the value it wrote.
func takeUnknown(ctx context.Context, rdb redis.UniversalClient, tenant, id, raw string, rec unknownRecord, now time.Time) (held string, ok bool, err error) {
	rec.HeldUntil = now.Add(pendingTTL).UnixMilli()
	held = rec.encode()
	c := lua.Call{Script: lua.IdempotencyTake, Keys: []string{keys.Idempotency(tenant, id)},
		Args: []any{raw, held, keys.IdempotencyTTL.Milliseconds()}}
	v, err := c.Run(ctx, rdb).Result()
	if err != nil {
		return "", false, fmt.Errorf("ingest: take id %s of %s: %w", id, tenant, err)
	}
	n, err := lua.IdempotencyTake.Int(v, "the reply")
	if err == nil && n != 0 && n != 1 {
		err = lua.IdempotencyTake.ReplyError("%d, want 0 or 1", n)
	}
	return held, n == 1, err
}

// markUnknown stores recs (held by no one) under their ids for
// keys.IdempotencyTTL, in one call, on the keys that still hold what this
// request left there (expect[i] for recs[i]: its marker or its held
// record; "" for any value) or are gone (idemWrite): after an enqueue
// whose outcome is unknown, and to free the ids of retries that failed. Sent
// again after a lost reply, it never overwrites what a later request
// stored.
func markUnknown(ctx context.Context, rdb redis.UniversalClient, tenant string, recs []unknownRecord, expect []string) error {
	if len(recs) == 0 {
		return nil
	}
	ids, vals := make([]string, len(recs)), make([]string, len(recs))
	for i, r := range recs {
		r.HeldUntil = 0
		ids[i], vals[i] = r.JobID, r.encode()
	}
	if err := idemWrite(ctx, rdb, tenant, ids, expect, vals); err != nil {
		return fmt.Errorf("ingest: mark ids of %s unknown: %w", tenant, err)
	}
	return nil
}

// retried is one job of a request that retries an id whose outcome was
// unknown: its index in the request and its record.
type retried struct {
	idx  int
	rec  unknownRecord
	held string // the record as this request holds it (takeUnknown)
}

// retryUnknown decides what a reservation that found the unknown record raw
// of jobs[i] does: hold it for this request (the same job: added to
// sub.retried), or answer a 409 (another retry holds it, or it changed
// meanwhile) or a 422 (another job under the id).
func (s *Server) retryUnknown(ctx context.Context, snap *snapshot, tenant string, jobs []job, i int, raw string, sub *submission) *problem {
	j := jobs[i]
	rec, _ := parseUnknown(raw)
	f := fieldName(j.field, "id")
	now := s.clock.Now()
	if rec.HeldUntil > now.UnixMilli() {
		return inProgress(f, j.id)
	}
	if rec.Digest != digestOf(j) {
		return newProblem(http.StatusUnprocessableEntity, f, fmt.Sprintf(
			"%s %q belongs to another job, whose enqueue outcome is unknown (it may be queued); retry it with the same job, or use another id", f, j.id))
	}
	ctx, cancel := context.WithTimeout(ctx, snap.redisTimeout)
	defer cancel()
	held, ok, err := takeUnknown(ctx, s.rdb, tenant, j.id, raw, rec, now)
	if err != nil {
		s.warnRepeat(tenant, "holding an unknown id for its retry failed", "id", j.id, "err", err)
		p := newProblem(http.StatusServiceUnavailable, "", "redis is unreachable; retry later")
		p.Backend, p.RetryAfter = "redis", retryAfterSeconds(snap.retryAfter)
		return p
	}
	if !ok {
		return inProgress(f, j.id)
	}
	sub.retried = append(sub.retried, retried{idx: i, rec: rec, held: held})
	return nil
}

// retryUnknowns runs retryUnknown for every reservation of res (of the
// jobs at idx) that found an unknown record; on the first problem it gives
// sub's reservations back and returns it.
func (s *Server) retryUnknowns(ctx context.Context, snap *snapshot, ts *tenantState, jobs []job, idx []int, res []reservation, sub *submission) *problem {
	for k, r := range res {
		if r.state != idemUnknown {
			continue
		}
		if p := s.retryUnknown(ctx, snap, ts.name, jobs, idx[k], r.raw, sub); p != nil {
			s.giveBack(ctx, snap, ts, sub)
			return p
		}
	}
	return nil
}

// inProgress is the 409 of an id another request holds.
func inProgress(field, id string) *problem {
	p := newProblem(http.StatusConflict, field, fmt.Sprintf(
		"a request with %s %q is in progress; retry after 1 s to get its answer", field, id))
	p.RetryAfter = 1
	return p
}

// keepUnknown stores, after an enqueue (or a scheduled store) whose outcome
// is unknown, the unknown record of every job of sub with a client id (envs
// holds them in sub.fresh's order), retried and scheduled ones included: a
// scheduled job the failed request removed again (unschedule) is stored
// anew by the retry, one it could not remove or whose store was the unknown
// one is replaced or, once moved, skipped (schedule_add.lua). A failure is
// logged: the pending markers then lapse after pendingTTL, and a retry
// after that enqueues the job anew (with the same job id).
func (s *Server) keepUnknown(ctx context.Context, snap *snapshot, ts *tenantState, jobs []job, sub *submission, envs []queue.Envelope) {
	var recs []unknownRecord
	var expect []string
	for i, k := range sub.fresh {
		if j := jobs[k]; j.id != "" {
			recs = append(recs, unknownRecord{Status: unknownStatus, JobID: j.id, EnqueuedAt: envs[i].EnqueuedAt, Digest: digestOf(j)})
			expect = append(expect, sub.holding(k))
		}
	}
	s.freeUnknown(ctx, snap, ts, recs, expect)
}

// holding is what the key of job k's id holds while this request holds it:
// the held unknown record of a retried id, else the request's marker; ""
// (any value) when the ids could not be reserved (sub.unreserved).
func (sub *submission) holding(k int) string {
	for _, r := range sub.retried {
		if r.idx == k {
			return r.held
		}
	}
	if sub.unreserved {
		return ""
	}
	return sub.marker
}

// giveBack undoes sub's reservations after a refusal or a failure that
// stored nothing: fresh ids are released, retried ones become free unknown
// records again (their first enqueue may still have stored the job).
func (s *Server) giveBack(ctx context.Context, snap *snapshot, ts *tenantState, sub *submission) {
	s.releaseIDs(ctx, snap, ts, sub.reserved, sub.marker)
	recs := make([]unknownRecord, len(sub.retried))
	expect := make([]string, len(sub.retried))
	for i, r := range sub.retried {
		recs[i], expect[i] = r.rec, r.held
	}
	s.freeUnknown(ctx, snap, ts, recs, expect)
}

// freeUnknown stores recs held by no one (markUnknown, on the keys that
// hold expect), even when the client has gone away. A store that got no
// reply is sent again (sendAgain); a failure is logged.
func (s *Server) freeUnknown(ctx context.Context, snap *snapshot, ts *tenantState, recs []unknownRecord, expect []string) {
	if len(recs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snap.redisTimeout)
	defer cancel()
	if err := markUnknown(ctx, s.rdb, ts.name, recs, expect); err != nil {
		s.warnRepeat(ts.name, "recording ids with an unknown enqueue outcome failed; sent again until Redis answers", "ids", len(recs), "err", err)
		s.sendAgain(err, func(ctx context.Context) error { return markUnknown(ctx, s.rdb, ts.name, recs, expect) })
	}
}
