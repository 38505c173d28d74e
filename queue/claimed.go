package queue

import (
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/limits"
)

// Claimed is one job a drainer holds until it finishes, defers or releases
// it. The backend that handed it out sets its fields; the drainer only reads
// them. It belongs to one Consumer and is not safe for concurrent use.
type Claimed struct {
	// Envelope is the decoded job. When DecodeErr is set it holds only
	// the tenant it was claimed for, an id (from the backend) and Cost 1.
	Envelope Envelope
	// Raw is the envelope as stored on the backend.
	Raw []byte
	// DecodeErr is set for a poison job (an envelope Decode refuses); the
	// drainer sends it to the dead-letter queue.
	DecodeErr error
	// Cancelled reports that the job was cancelled (DELETE /v1/jobs/{id})
	// while it was queued.
	Cancelled bool
	// BeatAt is the job's last heartbeat as the backend read it with the
	// claim (the job-state hash's beat_at, else its enqueued_at); zero when
	// none was read. Now is the backend's time of that read (Redis TIME);
	// zero when not read. HeartbeatLapsed compares them.
	BeatAt, Now time.Time
	// Duplicate reports that this very job (the same id and enqueued_at)
	// was delivered already: its recorded state is done (or, on Kafka,
	// another copy of it is claimed from the same consumer now, or its
	// recorded delivery came from a copy in another partition and is under
	// way). It is a second copy (an enqueue sent again after its outcome was
	// unknown, or a redelivery of a job whose delivery succeeded); the
	// drainer settles it unsent (Outcome.Duplicate). Backends set it with
	// SameJob.
	Duplicate bool
	// Source names where this copy of the job was read from, among the
	// places a backend can hold two copies of one job: the Kafka record's
	// partition (a produce retried after an unknown outcome lands in
	// another partition when the topic gained partitions meanwhile). A
	// delivery start records it (the job state's start_part), and a copy
	// from another Source finds that delivery under way (Duplicate). ""
	// for the Redis backend, which holds one copy.
	Source string
	// Offset is the Kafka record's offset in its partition (Source): with
	// it, the record's identity, which a finish marks on the job
	// (kafka_finish.lua's fin) so that the same record finished again (a
	// finish sent again, or handed out again after a revoke) lowers the
	// backlog once. 0 for the Redis backend.
	Offset int64
	// Started is the delivery's attempt number (Sluice-Attempt, >= 1) when
	// the backend recorded its start together with the claim (Taker); 0 when
	// it did not, and the drainer records the start itself.
	Started int
	// InLease reports that the backend counts this started delivery with
	// the job's lease (the Redis backend's take: keys.Processing), not in
	// keys.Delivering, so nothing extends or removes it there.
	InLease bool
	// Counted reports that the backend added this started delivery's cost
	// to the tenant's outflow (keys.Outflow, in the second of its send)
	// with its start (the Redis backend's take), so the drainer leaves it
	// out of its own counts; CountedAt is the unix second it was counted
	// in. A job the drainer gives back unsent after such a take (its lane
	// stopping, its tenant paused or removed before its send) is taken back
	// out of that second by the drainer's next flush.
	Counted   bool
	CountedAt int64
	// SendDelay is how long after the take's answer a job whose outflow
	// turn was granted ahead (queue.TurnTaker) is sent, so no send is early;
	// 0 for a turn free at once, or none taken.
	SendDelay time.Duration

	token string
}

// SameJob reports whether env is the job recorded with enqueued_at
// doneMS (unix ms, as the job state holds it; 0: none recorded).
func SameJob(env Envelope, doneMS int64) bool {
	return doneMS > 0 && !env.EnqueuedAt.IsZero() && env.EnqueuedAt.UnixMilli() == doneMS
}

// HeartbeatLapsed reports whether the job is a heartbeat job
// (Envelope.HeartbeatMS) whose submitter stopped polling: more than its
// interval passed between its last beat and Now. The last beat is the
// latest of BeatAt, the envelope's EnqueuedAt and its NotBefore (a
// scheduled job's heartbeat starts when it is due). A claim whose
// backend read no time (Now zero, as when Redis failed) never lapses: a
// job is never dropped on a failed read.
func (c *Claimed) HeartbeatLapsed() bool {
	iv := c.Envelope.Heartbeat()
	if iv <= 0 || c.Now.IsZero() {
		return false
	}
	last := c.BeatAt
	if c.Envelope.EnqueuedAt.After(last) {
		last = c.Envelope.EnqueuedAt
	}
	if nb := c.Envelope.NotBefore; nb != nil && nb.After(last) {
		last = *nb
	}
	return c.Now.Sub(last) > iv
}

// NewClaimed returns a claimed job whose Token is token. Backends call it;
// token must be unique to this claim of the job.
func NewClaimed(token string) *Claimed { return &Claimed{token: token} }

// ClaimCost is the cost a claimed job counts (its backlog share, its turn):
// the envelope's cost within [1, limits.MaxCost]. Ingest queues none
// outside it (ingest.max_job_cost); a crafted envelope's cost below 1 counts
// 1, and one above MaxCost counts MaxCost, which the finish scripts take
// (their Lua doubles sum costs exactly up to it; a cost they refused would
// fail its finish on every delivery) and which no shaped tenant's bucket
// passes (the drainer sends it to the DLQ, cost_exceeds_capacity).
func ClaimCost(cost int64) int64 { return min(max(cost, 1), limits.MaxCost) }

// Token returns a string unique to this claim of the job (a second claim of
// the same job after a lease expired gets another), for holding per-claim
// state elsewhere, such as a concurrency slot. The Redis backend's lease
// member in keys.Processing is this token.
func (c *Claimed) Token() string { return c.token }

// Outcome is how a job ends, given to Consumer.Finish. The zero Outcome is a
// delivered job (state done).
type Outcome struct {
	// Dropped, when set, says why the job ends unsent: jobstate.Cancelled
	// or jobstate.Expired, recorded as its state instead of jobstate.Done.
	Dropped string
	// Reason, with Dropped, says why it was dropped (recorded as the job
	// state's reason): ReasonHeartbeat for a heartbeat job whose submitter
	// stopped polling; "" for a cancel or a passed deadline.
	Reason string
	// Dead, when not nil, makes the job dead: its record goes to the
	// dead-letter queue and its state is jobstate.Dead with Dead's reason
	// and error. It takes precedence over Dropped.
	Dead *DeadLetter
	// Duplicate ends a copy of a job delivered already (Claimed.Duplicate):
	// the tenant's backlog is lowered by its cost (each copy was counted
	// when it was queued) and nothing is recorded, so the job's state stays
	// done. It takes precedence over Dead and Dropped.
	Duplicate bool
}

// State returns the job state Finish records for o (package jobstate), with
// the last error and reason that go with it: none ("") for a duplicate,
// dead with the dead letter's error and reason, else Dropped with Reason,
// else done.
func (o Outcome) State() (state, lastError, reason string) {
	switch {
	case o.Duplicate:
		return "", "", ""
	case o.Dead != nil:
		return jobstate.Dead, o.Dead.Error, o.Dead.Reason
	case o.Dropped != "":
		return o.Dropped, "", o.Reason
	}
	return jobstate.Done, "", ""
}

// ReasonHeartbeat is the reason of a heartbeat job dropped as expired
// because its last beat was older than its interval (Claimed.HeartbeatLapsed).
const ReasonHeartbeat = "heartbeat"

// Retry is a failed delivery's next attempt, given to Consumer.Defer.
type Retry struct {
	// Delay is how long the job waits before it is handed out again (a
	// negative one is zero).
	Delay time.Duration
	// Next is the job as it is handed out again (its attempt count
	// updated).
	Next Envelope
	// LastError is the failed delivery's error, recorded with the job's
	// state jobstate.Retrying.
	LastError string
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

// WithJob returns d carrying raw, the job as it was stored: as JSON when it
// is valid JSON, else as a JSON string.
func (d DeadLetter) WithJob(raw []byte) DeadLetter {
	d.Job = json.RawMessage(raw)
	if !json.Valid(raw) {
		b, _ := json.Marshal(string(raw))
		d.Job = b
	}
	return d
}
