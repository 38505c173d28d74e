package queue

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Claimed is one job a drainer holds until it finishes, defers or releases
// it. It belongs to one Consumer and is not safe for concurrent use.
type Claimed struct {
	// Envelope is the decoded job. When DecodeErr is set it holds only
	// Tenant (from the lane) and Cost 1.
	Envelope Envelope
	// Raw is the envelope as stored on the backend.
	Raw []byte
	// DecodeErr is set for a poison job (an envelope Decode refuses); the
	// drainer sends it to the dead-letter queue.
	DecodeErr error
	// Cancelled reports that the job was cancelled (DELETE /v1/jobs/{id})
	// while it was queued.
	Cancelled bool
	// Dropped, set by the drainer before Finish, says why a job is finished
	// unsent: jobstate.Cancelled or jobstate.Expired. Finish records it as
	// the job's state instead of jobstate.Done (package jobstate).
	Dropped string
	// LastError, set by the drainer before Defer, is the failed delivery's
	// error, recorded with the job's state jobstate.Retrying.
	LastError string

	member string // Redis: the lease member in keys.Processing
}

// DeadLetter is the record a dead job leaves in the dead-letter queue.
type DeadLetter struct {
	// Reason says why the job is dead: "rejected" (4xx or a permanent
	// handler error), "attempts_exhausted", "poison", "cost_exceeds_capacity"
	// (the job's cost exceeds its tenant's outflow capacity: it could never
	// be sent).
	Reason string `json:"reason"`
	// Error is the last error's text.
	Error string `json:"error,omitempty"`
	// Status is the last HTTP status from the sink (0 when none).
	Status int `json:"status,omitempty"`
	// Response is the start of the last response body.
	Response string `json:"response,omitempty"`
	// Attempts is how many deliveries were tried.
	Attempts int `json:"attempts"`
	// At is when the job was declared dead.
	At time.Time `json:"at"`
	// Job is the envelope as it was stored.
	Job json.RawMessage `json:"job"`
}

// ErrLeaseLost is returned when a job is finished, deferred or released
// after its lease was lost (it expired and the job went back to the queue):
// the job will be delivered again, which at-least-once delivery allows.
var ErrLeaseLost = errors.New("queue: lease lost")

// Consumer is the drain side of a queue backend, organised per tenant so a
// drainer can run one lane per tenant and no tenant waits behind another.
// Every job is delivered at least once: a job stays on the backend until
// Finish, and a drainer that dies holding jobs leaves them to be delivered
// again (a reaper returns expired Redis leases; Kafka redelivers uncommitted
// offsets). Implementations are safe for concurrent use.
type Consumer interface {
	// Tenants lists the tenants that may have jobs.
	Tenants(ctx context.Context) ([]string, error)
	// Claim takes the next job of tenant. When there is none it returns a
	// nil job and how long the caller may wait before asking again (a retry
	// falling due, or a poll interval).
	Claim(ctx context.Context, tenant string) (*Claimed, time.Duration, error)
	// Extend keeps jobs claimed for tenant held for another lease period. It
	// returns the jobs whose lease was already lost.
	Extend(ctx context.Context, tenant string, jobs []*Claimed) ([]*Claimed, error)
	// Finish ends a job (delivered, dropped, or dead when dead is not nil),
	// writes the dead-letter record, lowers the tenant's backlog by the
	// job's cost and records the job's state (dead, job.Dropped or done;
	// package jobstate).
	Finish(ctx context.Context, job *Claimed, dead *DeadLetter) error
	// Defer holds the job aside for delay and then hands it out again as
	// next (the same job, its attempt count updated), and records the job's
	// state retrying with job.LastError. The tenant's other jobs go on
	// meanwhile.
	Defer(ctx context.Context, job *Claimed, delay time.Duration, next Envelope) error
	// Release hands the job out again now, unchanged (a drainer stopping).
	Release(ctx context.Context, job *Claimed) error
}

// Token returns a string unique to this claim of the job (a second claim of
// the same job after a lease expired gets another), for holding per-claim
// state elsewhere, such as a concurrency slot.
func (c *Claimed) Token() string { return c.member }
