// Package dlq keeps each tenant's dead letters where an operator can work
// with them: list them newest first, show one, redrive them onto the
// tenant's queue, delete them. The same on both queue backends: a dead job's
// letter is written to a per-tenant Redis index (keys.JobIndex(t, "dead"),
// scored by when the job died) and records hash (keys.DeadRecords), by the
// script that finishes the job (ack.lua on Redis, job_state_settle.lua on
// Kafka, where the letter also goes to the DLQ topic). Retention is bounded
// (keys.DeadMaxJobs, keys.DeadTTL) and each record by MaxRecordBytes.
// docs/adr/0014-dead-letters.md records the choices.
package dlq

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/sluicehq/sluice/queue"
)

// Bounds of one dead letter.
const (
	// MaxRecordBytes bounds a stored dead letter's JSON. A larger one is
	// stored with its response and error cut to ExcerptBytes and its job's
	// payload replaced by the payload's first ExcerptBytes as a JSON string,
	// marked Truncated; such a job cannot be redriven (the Kafka backend's
	// DLQ topic still holds it whole).
	MaxRecordBytes = 64 << 10
	// ExcerptBytes is the length of a payload excerpt in a listing.
	ExcerptBytes = 256
)

// Stored is a dead letter as stored in keys.DeadRecords: the queue's
// DeadLetter and whether it was cut to MaxRecordBytes.
type Stored struct {
	queue.DeadLetter
	// Truncated says the job's payload was cut (MaxRecordBytes).
	Truncated bool `json:"truncated,omitempty"`
}

// Encode returns the stored JSON of dead, the dead letter of the job stored
// as raw, within MaxRecordBytes (see MaxRecordBytes). Both queue backends'
// Finish call it.
func Encode(dead queue.DeadLetter, raw []byte) (string, error) {
	st := Stored{DeadLetter: dead.WithJob(raw)}
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("dlq: encode dead letter: %w", err)
	}
	if len(b) <= MaxRecordBytes {
		return string(b), nil
	}
	st.Truncated = true
	st.Response, _ = Cut(st.Response, ExcerptBytes)
	st.Error, _ = Cut(st.Error, ExcerptBytes)
	st.Job = cutJob(raw)
	if b, err = json.Marshal(st); err != nil {
		return "", fmt.Errorf("dlq: encode dead letter: %w", err)
	}
	return string(b), nil
}

// cutJob returns the job stored as raw with its payload replaced by a JSON
// string of the payload's first ExcerptBytes; a raw that is not an envelope
// becomes a JSON string of its own first ExcerptBytes.
func cutJob(raw []byte) json.RawMessage {
	env, err := queue.Decode(raw)
	if err != nil {
		s, _ := Cut(string(raw), ExcerptBytes)
		return quote(s)
	}
	s, _ := Cut(string(env.Payload), ExcerptBytes)
	env.Payload = quote(s)
	b, err := env.Encode()
	if err != nil {
		return quote("")
	}
	return b
}

func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// Cut returns the longest prefix of s of at most n bytes that ends on a
// UTF-8 boundary, and whether it cut anything.
func Cut(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}

// decodeStored parses a stored dead letter; ok is false for one that is not
// a JSON object of that shape.
func decodeStored(rec string) (Stored, bool) {
	var st Stored
	if rec == "" || json.Unmarshal([]byte(rec), &st) != nil {
		return Stored{}, false
	}
	return st, true
}

// envelope returns the stored job's envelope, or why it cannot be redriven:
// SkipTruncated for a cut record, SkipPoison for a job that is no envelope
// of tenant.
func (st Stored) envelope(tenant string) (queue.Envelope, string) {
	if st.Truncated {
		return queue.Envelope{}, SkipTruncated
	}
	env, err := queue.Decode(st.Job)
	if err != nil || env.Tenant != tenant || env.Cost < 1 {
		return queue.Envelope{}, SkipPoison
	}
	return env, ""
}

// payload returns the stored job's payload (nil when the job is no
// envelope) and its excerpt: the payload's JSON text cut to ExcerptBytes,
// cut reporting it is not whole.
func (st Stored) payload() (payload json.RawMessage, excerpt string, cut bool) {
	var env struct {
		Payload json.RawMessage `json:"payload"`
	}
	if json.Unmarshal(st.Job, &env) != nil {
		var s string
		_ = json.Unmarshal(st.Job, &s)
		excerpt, cut = Cut(s, ExcerptBytes)
		return nil, excerpt, cut
	}
	if st.Truncated {
		var s string
		_ = json.Unmarshal(env.Payload, &s)
		excerpt, _ = Cut(s, ExcerptBytes)
		return nil, excerpt, true
	}
	excerpt, cut = Cut(string(env.Payload), ExcerptBytes)
	return env.Payload, excerpt, cut
}

// jobType reads the stored job's type ("" when none).
func (st Stored) jobType() string {
	var env struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(st.Job, &env)
	return env.Type
}

// scoreString formats a score (unix ms) as the scripts compare it.
func scoreString(ms int64) string { return strconv.FormatInt(ms, 10) }
