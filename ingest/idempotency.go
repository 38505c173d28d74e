package ingest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// Idempotency keys (keys.Idempotency) hold one of three values:
//
//   - a pending marker ("pending:<token>", the request's own: newMarker)
//     while the first request with the id is being admitted and enqueued,
//     with a TTL of pendingTTL, so that a request that dies halfway (a
//     crashed ingest) does not block the id for 24 hours; the token lets a
//     release delete only its own markers (idemWrite), so one sent again
//     after a lost reply is safe;
//   - the stored answer, {"status":202,"answer":{...}}, with a TTL of
//     keys.IdempotencyTTL, once the job is durable;
//   - an unknown record, {"status":503,"job_id":...,"enqueued_at":...}, with
//     a TTL of keys.IdempotencyTTL, after an enqueue whose outcome is
//     unknown (unknown.go).
//
// A request reserves its id with SET NX GET (one round trip, atomic), which
// either creates the marker or returns what is there: nothing (reserved), the
// marker (a concurrent request holds the id: 409), a stored answer
// (replayed, nothing enqueued), or an unknown record (the same job is
// enqueued again: unknown.go). A reservation whose request is refused or
// fails is deleted, so the client can retry with the same id; one whose
// enqueue outcome is unknown becomes an unknown record.
const (
	pendingPrefix = "pending" // every pending marker, and the older bare one
	pendingTTL    = time.Minute
)

// markerSource makes the request tokens of pending markers: a random
// prefix per process and a counter.
var markerSource = struct {
	prefix string
	n      atomic.Uint64
}{prefix: randomToken()}

// newMarker is a request's own pending marker.
func newMarker() string {
	return pendingPrefix + ":" + markerSource.prefix + "." + strconv.FormatUint(markerSource.n.Add(1), 36)
}

func randomToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storedAnswer is the value kept for a client id once its job is durable.
type storedAnswer struct {
	Status int             `json:"status"`
	Answer json.RawMessage `json:"answer"`
}

// idemState is what a reservation found.
type idemState int

const (
	idemReserved idemState = iota // the id was free; this request holds it
	idemPending                   // another request holds it
	idemStored                    // a job with the id was accepted before
	idemUnknown                   // a job with the id may have been queued
)

// reservation is the outcome of reserving one client id.
type reservation struct {
	state  idemState
	answer json.RawMessage // the stored answer when state is idemStored
	raw    string          // the stored record when state is idemUnknown
}

// reserve tries to reserve each id of tenant with marker (newMarker) in one
// pipelined round trip (all of a tenant's keys share its hash slot). An
// error means Redis could not be reached or answered nonsense; the
// reservations made before it may exist (the caller releases them,
// releaseIDs) and expire after pendingTTL.
func reserve(ctx context.Context, rdb redis.UniversalClient, tenant string, ids []string, marker string) ([]reservation, error) {
	cmds := make([]*redis.StatusCmd, len(ids))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.SetArgs(ctx, keys.Idempotency(tenant, id), marker,
				redis.SetArgs{Mode: "NX", Get: true, TTL: pendingTTL})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("ingest: reserve ids of %s: %w", tenant, err)
	}
	out := make([]reservation, len(ids))
	for i, c := range cmds {
		val, err := c.Result()
		switch {
		case errors.Is(err, redis.Nil):
			out[i] = reservation{state: idemReserved}
		case err != nil:
			return nil, fmt.Errorf("ingest: reserve id %s of %s: %w", ids[i], tenant, err)
		case strings.HasPrefix(val, pendingPrefix):
			out[i] = reservation{state: idemPending}
		default:
			if _, ok := parseUnknown(val); ok {
				out[i] = reservation{state: idemUnknown, raw: val}
				continue
			}
			var sa storedAnswer
			if err := json.Unmarshal([]byte(val), &sa); err != nil || len(sa.Answer) == 0 {
				return nil, fmt.Errorf("ingest: stored answer of id %s of %s is not valid: %q", ids[i], tenant, val)
			}
			out[i] = reservation{state: idemStored, answer: sa.Answer}
		}
	}
	return out, nil
}

// store keeps each id's answer (a 202) for keys.IdempotencyTTL, replacing the
// pending markers, in one pipelined round trip.
func store(ctx context.Context, rdb redis.UniversalClient, tenant string, ids []string, answers []json.RawMessage) error {
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			v, err := json.Marshal(storedAnswer{Status: 202, Answer: answers[i]})
			if err != nil {
				return fmt.Errorf("ingest: encode stored answer of %s: %w", id, err)
			}
			p.Set(ctx, keys.Idempotency(tenant, id), v, keys.IdempotencyTTL)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ingest: store answers of %s: %w", tenant, err)
	}
	return nil
}

// release deletes the reservations of ids that still hold marker (this
// request's: idemWrite) so that the client may retry.
func release(ctx context.Context, rdb redis.UniversalClient, tenant string, ids []string, marker string) error {
	if len(ids) == 0 {
		return nil
	}
	expect, vals := make([]string, len(ids)), make([]string, len(ids))
	for i := range ids {
		expect[i] = marker
	}
	if err := idemWrite(ctx, rdb, tenant, ids, expect, vals); err != nil {
		return fmt.Errorf("ingest: release ids of %s: %w", tenant, err)
	}
	return nil
}

// idemWrite is lua/idem_write.lua on tenant's ids: each key that still
// holds expect[i] ("" any value), or is gone when vals[i] is a value,
// becomes vals[i] for keys.IdempotencyTTL ("" deletes it), in one call.
func idemWrite(ctx context.Context, rdb redis.UniversalClient, tenant string, ids, expect, vals []string) error {
	ks := make([]string, len(ids))
	args := make([]any, 0, 1+2*len(ids))
	args = append(args, keys.IdempotencyTTL.Milliseconds())
	for i, id := range ids {
		ks[i] = keys.Idempotency(tenant, id)
		args = append(args, expect[i], vals[i])
	}
	return lua.Call{Script: lua.IdemWrite, Keys: ks, Args: args}.Run(ctx, rdb).Err()
}

// submission is a request's jobs after the idempotency step.
type submission struct {
	// answers holds one answer per job of the request; replayed jobs have
	// theirs already, fresh ones get it after the enqueue.
	answers []json.RawMessage
	// fresh are the indexes of the jobs to admit and enqueue, in order.
	fresh []int
	// reserved are the client ids this request reserved, with their job
	// indexes: their answers are stored after the enqueue, or they are
	// released when the request is refused.
	reserved    []string
	reservedIdx []int
	// retried are the jobs whose id had an unknown outcome, held by this
	// request to enqueue them again (unknown.go); they are in fresh too.
	retried []retried
	// marker is this request's pending marker (newMarker).
	marker string
	// unreserved: the ids could not be reserved (Redis did not answer) and
	// the tenant fails open, so the request goes on without deduplication.
	unreserved bool
	// one holds answers for a request of one job (no allocation of its own).
	one [1]json.RawMessage
}

// newSubmission is the submission of n jobs, before reservation: a lone
// job's answer slot lives in the submission itself.
func newSubmission(n int) *submission {
	sub := &submission{}
	sub.answers = sub.one[:]
	if n != 1 {
		sub.answers = make([]json.RawMessage, n)
	}
	return sub
}

// reserveIDs reserves the client ids of jobs. Jobs whose id was accepted
// before are answered from storage and not enqueued again. An id held by a
// concurrent request makes the whole request a 409 with Retry-After: 1 (it
// is not waited for: the holder may take up to the enqueue timeout).
//
// When Redis cannot be reached, a tenant that fails closed gets a 503; one
// that fails open goes on without deduplication: its jobs keep the client's
// id as job id, so the sink, which receives the job id as an idempotency key,
// can still drop a duplicate.
func (s *Server) reserveIDs(ctx context.Context, snap *snapshot, ts *tenantState, jobs []job) (*submission, *problem) {
	sub := newSubmission(len(jobs))
	var ids []string
	var idx []int
	for i, j := range jobs {
		if j.id != "" {
			ids = append(ids, j.id)
			idx = append(idx, i)
		}
	}
	if len(ids) == 0 {
		sub.fresh = allIndexes(len(jobs))
		return sub, nil
	}
	sub.marker = newMarker()
	rctx, cancel := context.WithTimeout(ctx, snap.redisTimeout)
	res, err := reserve(rctx, s.rdb, ts.name, ids, sub.marker)
	cancel()
	if err != nil {
		return s.reserveFailed(snap, ts, jobs, ids, sub, err)
	}
	conflict := -1
	for k, r := range res {
		switch r.state {
		case idemReserved:
			sub.reserved = append(sub.reserved, ids[k])
			sub.reservedIdx = append(sub.reservedIdx, idx[k])
		case idemPending:
			if conflict < 0 {
				conflict = idx[k]
			}
		case idemStored:
			sub.answers[idx[k]] = r.answer
		}
	}
	if conflict >= 0 {
		s.releaseIDs(ctx, snap, ts, sub.reserved, sub.marker)
		return nil, inProgress(fieldName(jobs[conflict].field, "id"), jobs[conflict].id)
	}
	if p := s.retryUnknowns(ctx, snap, ts, jobs, idx, res, sub); p != nil {
		return nil, p
	}
	for i := range jobs {
		if sub.answers[i] == nil {
			sub.fresh = append(sub.fresh, i)
		}
	}
	return sub, nil
}

// reserveFailed answers a reservation of ids that failed with err: a 503
// for a tenant that fails closed; one that fails open goes on without
// deduplication (sub.unreserved). The markers may have landed (no reply):
// they are released once Redis answers, so a retry is not held off for
// pendingTTL.
func (s *Server) reserveFailed(snap *snapshot, ts *tenantState, jobs []job, ids []string, sub *submission, err error) (*submission, *problem) {
	if marker := sub.marker; lua.MayHaveRun(err) { // a marker may have landed
		s.sendAgain(err, func(ctx context.Context) error { return release(ctx, s.rdb, ts.name, ids, marker) })
	}
	if !ts.allowOnError {
		s.metrics.decision(ts, "", resultError)
		s.warnRepeat(ts.name, "idempotency reservation failed, tenant fails closed", "err", err)
		p := newProblem(http.StatusServiceUnavailable, "", "redis is unreachable and this tenant fails closed; retry later")
		p.Backend = "redis"
		p.RetryAfter = retryAfterSeconds(snap.retryAfter)
		return nil, p
	}
	s.warnRepeat(ts.name, "idempotency reservation failed, going on without it", "err", err)
	sub.fresh = allIndexes(len(jobs))
	sub.unreserved = true
	return sub, nil
}

// storeAnswers keeps the answers of the reserved and retried ids. The jobs
// are durable already, so a failure is logged and not answered: a pending
// marker then expires after pendingTTL and a retry would enqueue the job
// again (with the same job id); a retried id's hold lapses and its retry
// enqueues the same job again.
func (s *Server) storeAnswers(ctx context.Context, snap *snapshot, ts *tenantState, sub *submission) {
	ids := append([]string(nil), sub.reserved...)
	answers := make([]json.RawMessage, 0, len(ids)+len(sub.retried))
	for _, i := range sub.reservedIdx {
		answers = append(answers, sub.answers[i])
	}
	for _, r := range sub.retried {
		ids = append(ids, r.rec.JobID)
		answers = append(answers, sub.answers[r.idx])
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snap.redisTimeout)
	defer cancel()
	if err := store(ctx, s.rdb, ts.name, ids, answers); err != nil {
		s.warnRepeat(ts.name, "storing idempotent answers failed; sent again until Redis answers", "ids", len(ids), "err", err)
		s.sendAgain(err, func(ctx context.Context) error { return store(ctx, s.rdb, ts.name, ids, answers) })
	}
}

// releaseIDs deletes this request's reservations (those holding marker)
// after a refusal, even when the client has gone away. A release that got
// no reply is sent again until Redis answers (sendAgain); before, the
// markers held the ids for pendingTTL, and a client retrying after a
// sub-second Redis blip got 409s for a minute.
func (s *Server) releaseIDs(ctx context.Context, snap *snapshot, ts *tenantState, ids []string, marker string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snap.redisTimeout)
	defer cancel()
	if err := release(ctx, s.rdb, ts.name, ids, marker); err != nil {
		s.warnRepeat(ts.name, "releasing idempotency reservations failed; sent again until Redis answers", "ids", len(ids), "err", err)
		s.sendAgain(err, func(ctx context.Context) error { return release(ctx, s.rdb, ts.name, ids, marker) })
	}
}

func allIndexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
