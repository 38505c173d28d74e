package drainer

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/depth"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/queue"
)

// This file holds what the drainer records for the visibility API
// (package jobstate): the start of each delivery, the deadlines of the
// deliveries in progress, and the tenants' queue depths.

// startTimeout bounds the write that records a delivery's start.
const startTimeout = time.Second

// startDelivery records that job's delivery starts (jobstate.Dispatch:
// state in_flight with the attempt number, the dispatched sequence, the
// deliveries in progress and the tenant's outflow of this second) and
// returns the script's answer: Deliver false when the job was cancelled
// after its claim or is done already (a copy delivered meanwhile), so it
// must be dropped; Attempt, the delivery's number, grows on every start of
// the job (a crash, a lost lease or a revoke included), at least the
// envelope's attempts + 1. A Redis error, or an unexpected reply, is
// counted (sluice_drainer_errors_total{op="job_state"}) and logged and the
// delivery goes on as the envelope's attempts + 1: a stale record never
// holds a job back, and an unexpected reply never drops one (at least
// once). Concurrent starts share round trips (startGroup). A delivery that
// goes on adds its cost to the drainer's outflow counts of this second
// (outflowCounts, flushed to keys.Outflow once a second), unless the
// consumer counted it with its start (queue.Claimed.Counted). A job whose
// start the consumer recorded with its claim (queue.Claimed.Started, a
// queue.Taker's take) is not recorded again.
func (d *Drainer) startDelivery(ctx context.Context, job *queue.Claimed) (jobstate.Start, bool) {
	st := jobstate.Start{Deliver: true, Attempt: job.Started}
	if job.Started == 0 {
		var ok bool
		if st, ok = d.recordStart(ctx, job); !ok {
			return st, false
		}
	}
	if st.Deliver && !job.Counted {
		d.units.add(job.Envelope.Tenant, d.clock.Now().Unix(), job.Envelope.Cost)
	}
	return st, true
}

// recordStart is startDelivery's write. ok is false when Redis did not
// answer (down, or a timeout): the start is not delivered then, since
// neither a cancel nor a copy done elsewhere could be checked, and the job
// goes back. (A Redis that drops the connection may have run the call: the
// job then reads in flight until its next start, a second or so later,
// which records it as a redelivery, one attempt more; that is taken over
// delivering a job that may be cancelled.) An unexpected reply still
// delivers (the script's explicit answers alone drop a job), as attempt
// Envelope.Attempt + 1.
func (d *Drainer) recordStart(ctx context.Context, job *queue.Claimed) (_ jobstate.Start, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	env := job.Envelope
	floor := jobstate.Start{Deliver: true, Attempt: env.Attempt + 1}
	v, err := d.starts.Do(ctx, jobstate.Dispatch{
		Tenant: env.Tenant, JobID: env.ID, Member: job.Token(), Attempt: env.Attempt + 1,
		EnqueuedAt: env.EnqueuedAt, Lease: d.cfg.Settings.Lease, Source: job.Source,
	}.Call())
	if err != nil {
		// Not delivered: a cancel or a copy done elsewhere could not be
		// checked. If the call ran after all (a timeout), the job reads
		// in flight until its next start, which counts it a redelivery.
		d.m.errors.WithLabelValues("job_state").Inc()
		d.fails.q.Warn("start/"+env.Tenant, "drainer: record delivery start; the job waits and goes back to its queue", "tenant", env.Tenant, "job_id", env.ID, "err", err)
		return jobstate.Start{}, false
	}
	st, err := jobstate.ReadStart(v)
	if err != nil {
		d.m.errors.WithLabelValues("job_state").Inc()
		d.log.Warn("drainer: record delivery start: unexpected reply; delivering", "tenant", env.Tenant, "job_id", env.ID, "err", err)
		return floor, true
	}
	return st, true
}

// startPipelines is how many pipelines of delivery starts may be in
// flight at once; starts that arrive meanwhile leave together in the next
// (lua.Group).
const startPipelines = 2

// sampleDepth sets sluice_queue_depth{tenant} to each configured tenant's
// backlog (internal/depth: one pipelined GET per sample for all tenants)
// every depth.Every until ctx is done. Every drainer and ingest sample the
// same counters, so dashboards take max by tenant. A tenant removed from
// the configuration loses its series.
func (d *Drainer) sampleDepth(ctx context.Context) {
	s := depth.Sampler{Redis: d.cfg.Redis, Gauge: d.m.depth}
	s.Run(ctx, func() []string {
		var tenants []string
		for t := range *d.tenants.Load() {
			tenants = append(tenants, t)
		}
		return tenants
	}, func(n int) { d.m.errors.WithLabelValues("queue_depth").Add(float64(n)) })
}
