package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/plainjson"
)

// EnvelopeVersion is the version written in every envelope's "v" field.
const EnvelopeVersion = 1

// Envelope is one job as it travels from ingest to a drainer. It is encoded as
// JSON; readers reject a version they do not know.
type Envelope struct {
	// Version is EnvelopeVersion when written by this code.
	Version int `json:"v"`
	// ID is the job id: the client's id when given, otherwise generated. The
	// sink receives it as an idempotency key.
	ID string `json:"id"`
	// Tenant owns the job.
	Tenant string `json:"tenant"`
	// Type is the job type, selecting per-type limits and targets.
	Type string `json:"type"`
	// Payload is the client's payload, passed to the sink unchanged.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Cost is how many units of the tenant's limits the job uses (>= 1).
	Cost int64 `json:"cost"`
	// Attempt counts delivery attempts already made (0 when enqueued).
	Attempt int `json:"attempt"`
	// EnqueuedAt is when ingest made the job durable.
	EnqueuedAt time.Time `json:"enqueued_at"`
	// Deadline, when set, is the time after which the job is dropped unsent.
	Deadline *time.Time `json:"deadline,omitempty"`
	// NotBefore, when set, is the time before which the job is not
	// delivered (a scheduled job: "not_before" or "delay" at submission).
	// It waits outside the queue until then (internal/scheduler).
	NotBefore *time.Time `json:"not_before,omitempty"`
	// HeartbeatMS, when > 0, makes the job a heartbeat job: it stays wanted
	// while its submitter polls it at least every HeartbeatMS milliseconds
	// (GET /v1/jobs/{id} or POST /v1/jobs/{id}:heartbeat); one whose last
	// beat is older than that when it reaches the head of its queue is
	// dropped unsent (state expired, reason heartbeat).
	HeartbeatMS int64 `json:"heartbeat_ms,omitempty"`
}

// Heartbeat returns the job's heartbeat interval (0: not a heartbeat job).
func (e *Envelope) Heartbeat() time.Duration {
	return time.Duration(e.HeartbeatMS) * time.Millisecond
}

// ErrUnknownVersion is returned by Decode for an envelope of another version.
var ErrUnknownVersion = errors.New("queue: unknown envelope version")

// Encode returns the envelope's JSON form: json.Marshal's bytes, written
// by hand when every field is plain (package plainjson: ids, names and
// times that need no escaping or check, a payload Marshal would keep as it
// is), which is every job ingest makes from a compact payload
// (TestEncodeIsMarshals).
func (e *Envelope) Encode() ([]byte, error) {
	if !e.plain() {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("queue: encode job %s: %w", e.ID, err)
		}
		return b, nil
	}
	// Room for every field: names and numbers, three times, the strings.
	b := make([]byte, 0, 256+len(e.ID)+len(e.Tenant)+len(e.Type)+len(e.Payload))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(e.Version), 10)
	b = append(b, `,"id":"`...)
	b = append(b, e.ID...)
	b = append(b, `","tenant":"`...)
	b = append(b, e.Tenant...)
	b = append(b, `","type":"`...)
	b = append(b, e.Type...)
	b = append(b, '"')
	if len(e.Payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, e.Payload...)
	}
	b = append(b, `,"cost":`...)
	b = strconv.AppendInt(b, e.Cost, 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	b = append(b, `,"enqueued_at":`...)
	b = plainjson.AppendTime(b, e.EnqueuedAt)
	if e.Deadline != nil {
		b = append(b, `,"deadline":`...)
		b = plainjson.AppendTime(b, *e.Deadline)
	}
	if e.NotBefore != nil {
		b = append(b, `,"not_before":`...)
		b = plainjson.AppendTime(b, *e.NotBefore)
	}
	if e.HeartbeatMS != 0 {
		b = append(b, `,"heartbeat_ms":`...)
		b = strconv.AppendInt(b, e.HeartbeatMS, 10)
	}
	return append(b, '}'), nil
}

// plain reports whether Encode may write e by hand: its strings and times
// are plain JSON and its payload, when any, is valid JSON json.Marshal
// would keep unchanged.
func (e *Envelope) plain() bool {
	return plainjson.String(e.ID) && plainjson.String(e.Tenant) && plainjson.String(e.Type) &&
		plainjson.Time(e.EnqueuedAt) && (e.Deadline == nil || plainjson.Time(*e.Deadline)) &&
		(e.NotBefore == nil || plainjson.Time(*e.NotBefore)) &&
		(len(e.Payload) == 0 || (plainjson.Compact(e.Payload) && json.Valid(e.Payload)))
}

// Decode parses an envelope and checks its version and required fields.
func Decode(b []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("queue: decode envelope: %w", err)
	}
	if e.Version != EnvelopeVersion {
		return e, fmt.Errorf("%w: %d", ErrUnknownVersion, e.Version)
	}
	if e.ID == "" || e.Tenant == "" {
		return e, fmt.Errorf("queue: decode envelope: missing id or tenant")
	}
	return e, nil
}
