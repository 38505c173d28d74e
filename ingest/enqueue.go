package ingest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/plainjson"
	"github.com/sluicehq/sluice/queue"
)

// jobAnswer is the 202 body of one accepted job (and one element of a
// batch's answer).
type jobAnswer struct {
	JobID      string    `json:"job_id"`
	Tenant     string    `json:"tenant"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	// DueAt is a scheduled job's due time (absent for an ordinary job).
	DueAt *time.Time `json:"due_at,omitempty"`
}

// marshal is a's JSON (appendJSON) in a buffer with room for all of it
// (names, two times, the id and tenant) and writeRawJSON's newline.
func (a jobAnswer) marshal() ([]byte, error) {
	return a.appendJSON(make([]byte, 0, 176+len(a.JobID)+len(a.Tenant)))
}

// appendJSON appends a's JSON to dst: exactly the bytes json.Marshal(a)
// makes (TestJobAnswerJSONIsMarshals), written by hand for the common
// answer (ids, tenant names and times that need no escaping or check,
// package plainjson) and by json.Marshal otherwise. The 202 path makes one
// answer per job, and encoding/json's reflection cost five allocations of
// each.
func (a jobAnswer) appendJSON(dst []byte) ([]byte, error) {
	if !plainjson.String(a.JobID) || !plainjson.String(a.Tenant) || !plainjson.Time(a.EnqueuedAt) ||
		(a.DueAt != nil && !plainjson.Time(*a.DueAt)) {
		b, err := json.Marshal(a)
		return append(dst, b...), err
	}
	dst = append(dst, `{"job_id":"`...)
	dst = append(dst, a.JobID...)
	dst = append(dst, `","tenant":"`...)
	dst = append(dst, a.Tenant...)
	dst = append(dst, `","enqueued_at":`...)
	dst = plainjson.AppendTime(dst, a.EnqueuedAt)
	if a.DueAt != nil {
		dst = append(dst, `,"due_at":`...)
		dst = plainjson.AppendTime(dst, *a.DueAt)
	}
	return append(dst, '}'), nil
}

// newJobID returns a time-ordered, unique 128-bit id as 32 hex digits: the
// first 48 bits are the Unix time in milliseconds, the other 80 are random
// (the layout of a ULID, spelt in hex so it is a valid keys.ValidID). Ids of
// different milliseconds sort by time; within one millisecond they are
// unordered.
func newJobID(now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// envelopes builds the envelopes of jobs, all enqueued at now. A due
// time (read when the request arrived) that now has passed becomes now: a
// job is never due before it was enqueued ("delay":"1ms").
func envelopes(tenant string, jobs []job, now time.Time) []queue.Envelope {
	out := make([]queue.Envelope, len(jobs))
	for i, j := range jobs {
		if j.due != nil && j.due.Before(now) {
			j.due = &now
		}
		id := j.id
		if id == "" {
			id = newJobID(now)
		}
		out[i] = queue.Envelope{
			Version:    queue.EnvelopeVersion,
			ID:         id,
			Tenant:     tenant,
			Type:       j.typ,
			Payload:    j.payload,
			Cost:       j.cost,
			EnqueuedAt: now,
			Deadline:   j.deadline,
			NotBefore:  utcOrNil(j.due),

			HeartbeatMS: j.heartbeat.Milliseconds(),
		}
	}
	return out
}

// utcOrNil returns t in UTC, nil for nil.
func utcOrNil(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// enqueue makes envs durable. It is not cancelled when the client goes away
// (the job may already be on the broker, and its idempotency answer must
// still be stored), but it is bounded by the shutdown timeout, the longest
// any request is allowed to take.
func (s *Server) enqueue(ctx context.Context, snap *snapshot, envs []queue.Envelope) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snap.shutdown)
	defer cancel()
	return s.producer.Enqueue(ctx, envs)
}

// unknownDetail makes the detail of p, an unknown outcome of jobs' fresh
// jobs (sub), promise at most once only where it holds: not when the ids
// could not be reserved (a fail-open tenant with Redis away: the request
// went on without them) nor for a job sent without an id. Before, every such
// 503 said a retry with the same id queues the job at most once, and a
// probe's fail-open tenant had 256 of 1,050 ids delivered 2 to 7 times.
func unknownDetail(p *problem, snap *snapshot, jobs []job, sub *submission) *problem {
	if !p.unknown {
		return p
	}
	head := maybeQueued(snap) + "; "
	if sub.unreserved {
		p.Detail = head + "its id could not be reserved (Redis did not answer and this tenant fails open), so a retry may queue it again"
		return p
	}
	for _, k := range sub.fresh {
		if jobs[k].id == "" {
			p.Detail = head + "a retry of a job sent without an id may queue it again (send an id to retry safely)"
			return p
		}
	}
	return p
}

// maybeQueued is the start of an unknown outcome's detail.
func maybeQueued(snap *snapshot) string {
	return "the " + snap.backend + " queue backend did not acknowledge the job in time and it may be queued"
}

// enqueueProblem answers an Enqueue error. Never a 202: a job the producer
// did not acknowledge is not durable. A refused job (queue.ErrInvalidJob, for
// example larger than the backend takes) is a 422; anything else, including
// queue.ErrUnavailable, is a 503 + Retry-After naming the backend. One whose
// outcome is unknown (queue.ErrUnknownOutcome: the job may be queued) is
// marked so, and its detail says a retry with the same id is safe.
func enqueueProblem(snap *snapshot, tenant string, err error) *problem {
	if errors.Is(err, queue.ErrInvalidJob) {
		p := newProblem(http.StatusUnprocessableEntity, "", fmt.Sprintf("the queue refused the job: %v", err))
		p.Tenant = tenant
		return p
	}
	detail := fmt.Sprintf("the %s queue backend did not acknowledge the job; retry later", snap.backend)
	unknown := errors.Is(err, queue.ErrUnknownOutcome)
	if unknown {
		detail = maybeQueued(snap) + "; a retry with the same id queues it at most once"
	}
	p := newProblem(http.StatusServiceUnavailable, "", detail)
	p.Tenant = tenant
	p.Backend = snap.backend
	p.RetryAfter = retryAfterSeconds(snap.retryAfter)
	p.unknown = unknown
	return p
}
