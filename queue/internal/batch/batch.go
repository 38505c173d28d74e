// Package batch checks, encodes and groups the jobs of one Enqueue call by
// tenant: the first step every queue backend's producer takes.
package batch

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// Tenant is the jobs of one tenant from one Enqueue call, encoded, in the
// order they were given.
type Tenant struct {
	// Tenant owns every job.
	Tenant string
	// Cost is the sum of the jobs' costs.
	Cost int64
	// Jobs are the envelopes, their Version and EnqueuedAt set.
	Jobs []*queue.Envelope
	// Values are the jobs' encodings, in the order of Jobs.
	Values [][]byte
}

// Prepare checks and encodes jobs and groups them by tenant, keeping the
// order of first appearance of each tenant and the order of jobs within one.
// A zero Version becomes queue.EnvelopeVersion and a zero EnqueuedAt becomes now,
// in a copy: the caller's jobs are not modified. Any invalid job fails the
// whole call with an error wrapping queue.ErrInvalidJob.
func Prepare(jobs []queue.Envelope, now time.Time) ([]Tenant, error) {
	if len(jobs) == 1 {
		return prepareOne(jobs[0], now)
	}
	var batches []Tenant
	index := make(map[string]int, 1)
	for i := range jobs {
		e := jobs[i]
		b, err := prepare(&e, now)
		if err != nil {
			return nil, err
		}
		k, ok := index[e.Tenant]
		if !ok {
			k = len(batches)
			index[e.Tenant] = k
			batches = append(batches, Tenant{Tenant: e.Tenant})
		}
		tb := &batches[k]
		tb.Cost += e.Cost
		tb.Jobs = append(tb.Jobs, &e)
		tb.Values = append(tb.Values, b)
	}
	return batches, nil
}

// lone is the batch of one job, in one allocation: Prepare's common call
// (an ingest request of one job) made four.
type lone struct {
	t [1]Tenant
	e queue.Envelope
	j [1]*queue.Envelope
	v [1][]byte
}

// prepareOne is Prepare of the one job e.
func prepareOne(e queue.Envelope, now time.Time) ([]Tenant, error) {
	o := &lone{e: e}
	b, err := prepare(&o.e, now)
	if err != nil {
		return nil, err
	}
	o.j[0], o.v[0] = &o.e, b
	o.t[0] = Tenant{Tenant: o.e.Tenant, Cost: o.e.Cost, Jobs: o.j[:], Values: o.v[:]}
	return o.t[:], nil
}

// prepare checks e, fills its zero Version and EnqueuedAt, and encodes it.
func prepare(e *queue.Envelope, now time.Time) ([]byte, error) {
	if err := checkJob(e); err != nil {
		return nil, err
	}
	if e.Version == 0 {
		e.Version = queue.EnvelopeVersion
	}
	if e.EnqueuedAt.IsZero() {
		e.EnqueuedAt = now
	}
	b, err := e.Encode()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", queue.ErrInvalidJob, err)
	}
	return b, nil
}

// checkJob returns an error wrapping queue.ErrInvalidJob when e cannot be queued.
func checkJob(e *queue.Envelope) error {
	switch {
	case !keys.ValidTenant(e.Tenant):
		return fmt.Errorf("%w: job %q: tenant %q is not 1-64 characters of [A-Za-z0-9._-]", queue.ErrInvalidJob, e.ID, e.Tenant)
	case e.ID == "":
		return fmt.Errorf("%w: a job of tenant %s has no id", queue.ErrInvalidJob, e.Tenant)
	case e.Cost < 1:
		return fmt.Errorf("%w: job %s: cost %d is below 1", queue.ErrInvalidJob, e.ID, e.Cost)
	case e.Version != 0 && e.Version != queue.EnvelopeVersion:
		return fmt.Errorf("%w: job %s: %w: %d", queue.ErrInvalidJob, e.ID, queue.ErrUnknownVersion, e.Version)
	}
	return nil
}
