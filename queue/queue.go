// Package queue holds sluice's queue backends (Kafka and Redis lists) behind
// one interface, and the versioned job envelope they carry.
//
// A Producer's Enqueue returns nil only when every job it was given is durable
// on the backend: acknowledged by all in-sync Kafka replicas, or written to
// Redis together with the tenant's backlog counter in one script. ingest
// answers 202 only after that.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
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
}

// ErrUnknownVersion is returned by Decode for an envelope of another version.
var ErrUnknownVersion = errors.New("queue: unknown envelope version")

// Encode returns the envelope's JSON form.
func (e *Envelope) Encode() ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("queue: encode job %s: %w", e.ID, err)
	}
	return b, nil
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

// ErrUnavailable wraps every error that means the backend could not be
// reached or did not acknowledge; ingest answers it with 503 + Retry-After.
var ErrUnavailable = errors.New("queue: backend unavailable")

// Producer durably enqueues jobs.
type Producer interface {
	// Enqueue makes every job durable and returns nil, or returns an error
	// (wrapping ErrUnavailable when the backend is down). Jobs of one call
	// may belong to different tenants. It is safe for concurrent use, and
	// concurrent calls share round trips where the backend allows.
	Enqueue(ctx context.Context, jobs []Envelope) error
	// Close flushes and releases the producer.
	Close() error
}
