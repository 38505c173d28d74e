// Package drainer takes jobs off the queue and hands them to each tenant's
// downstream at the tenant's outflow rate, across any number of drainer
// instances, delivering every admitted job at least once.
//
// A Drainer runs one lane per tenant: claim → drop if cancelled or expired →
// wait for a concurrency slot (outflow.Semaphore) and the job's turn in the
// tenant's shared leaky bucket (outflow.Bucket) → dispatch to the Handler → finish, defer a retry, or
// dead-letter. A job whose cost exceeds the bucket's capacity can never
// pass it and is dead-lettered at once (cost_exceeds_capacity). Lanes are
// independent goroutines, so a throttled, slow or backlogged tenant never
// delays another; a retry waits outside its lane (queue.Consumer.Defer), so
// it delays neither. A lane whose backend call fails pauses (100 ms doubling
// to 5 s, jittered) before it tries again.
package drainer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// Handler delivers one job to its downstream. sluice's drainer calls it once
// per attempt; job.Attempt is the number of earlier starts of the job (0 on
// the first), counted in the job's recorded state, so a delivery after a
// crash, a lost lease or a rebalance counts too. Deliveries are at least once: the same job id may arrive again
// (after a drainer died, a lease expired or a consumer-group rebalance), so
// a Handler should treat job.ID as an idempotency key.
//
// The returned error decides what happens next:
//   - nil: delivered; the job is finished.
//   - a *RetryAfterError: the downstream asked to wait; the job is retried
//     after that long without spending an attempt.
//   - a *PermanentError: the job can never succeed; it goes to the
//     dead-letter queue at once.
//   - any other error: retried with exponential backoff and full jitter
//     until the drainer's MaxAttempts, then dead-lettered.
//
// Handle must return when ctx is done.
type Handler interface {
	Handle(ctx context.Context, job queue.Envelope) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, job queue.Envelope) error

// Handle calls f(ctx, job).
func (f HandlerFunc) Handle(ctx context.Context, job queue.Envelope) error { return f(ctx, job) }

// RetryAfterError says the downstream asked for a pause (HTTP 429 or 503
// with Retry-After): the job is retried after After without spending an
// attempt, and the tenant's adaptive rate backs off.
type RetryAfterError struct {
	// After is how long to wait, >= 0.
	After time.Duration
	// Status is the HTTP status (0 for a Go Handler).
	Status int
	// Body is the start of the response body.
	Body string
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("drainer: downstream asked to retry after %v (status %d)", e.After, e.Status)
}

// RetryAfter returns a *RetryAfterError asking for a retry after d.
func RetryAfter(d time.Duration) error { return &RetryAfterError{After: max(d, 0)} }

// PermanentError says a job can never succeed (HTTP 4xx other than 429):
// it goes to the dead-letter queue without further attempts.
type PermanentError struct {
	// Err is the reason.
	Err error
	// Status is the HTTP status (0 for a Go Handler).
	Status int
	// Body is the start of the response body.
	Body string
}

func (e *PermanentError) Error() string { return "drainer: permanent failure: " + e.Err.Error() }

// Unwrap returns the reason.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent: the job goes to the dead-letter queue.
func Permanent(err error) error { return &PermanentError{Err: err} }

// StatusError is a retryable HTTP failure: a 5xx, or 429/503 without a
// usable Retry-After.
type StatusError struct {
	// Status is the HTTP status.
	Status int
	// Body is the start of the response body.
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("drainer: downstream answered %d", e.Status) }

// outcome is what the drainer does with a job after one attempt.
type outcome int

const (
	outDone       outcome = iota // delivered
	outRetryAfter                // downstream asked for a pause; attempt not spent
	outRetry                     // retry with backoff
	outDead                      // dead-letter
	outStopped                   // the drainer is stopping; hand the job back
)

// classify maps a Handler's error to an outcome, and reports whether the
// downstream signalled overload (429/503), which lowers the adaptive rate.
func classify(err error, stopping bool) (o outcome, overload bool) {
	if err == nil {
		return outDone, false
	}
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		return outRetryAfter, true
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		return outDead, false
	}
	if stopping {
		return outStopped, false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return outRetry, se.Status == 429 || se.Status == 503
	}
	return outRetry, false
}
