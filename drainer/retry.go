package drainer

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/queue"
)

// deferAsAsked defers job, whose delivery (attempt) the downstream answered
// with a Retry-After (err), for the pause it asked (retryAfter), spending
// none of its attempts.
func (d *Drainer) deferAsAsked(job *queue.Claimed, attempt int, lbl string, err error) {
	env := job.Envelope
	var ra *RetryAfterError
	errors.As(err, &ra)
	d.fails.failed(env.Tenant, env.ID, attempt, "retry_after", err)
	d.m.dispatch.WithLabelValues(lbl, "retry_after").Inc()
	d.m.retries.WithLabelValues(lbl, "retry_after").Inc()
	r := queue.Retry{Delay: d.retryAfter(ra.After), Next: env, LastError: err.Error()}
	d.settle(job, func(ctx context.Context) error { return d.cfg.Consumer.Defer(ctx, job, r) }, "defer")
}

// retryAfter is the pause of a job whose downstream asked for one: after,
// but at least the backoff's base (drainer.backoff_base). A Retry-After of
// 0 or a date in the past, answered on every try, spends no attempt, so
// without the floor it would resend the job in a tight loop, never
// dead-lettered, for as long as the downstream answers so.
func (d *Drainer) retryAfter(after time.Duration) time.Duration {
	floor := d.backoff.Base
	if floor <= 0 {
		floor = config.DefaultBackoffBase
	}
	return max(after, floor)
}

// giveBackUnstarted gives back a job whose start could not be recorded
// (Redis did not answer) after startRetryPause (or at once when ctx ends):
// it goes back to its queue, undelivered, and is started again once Redis
// answers. The lane's slot is held meanwhile, so a lane whose starts fail
// pauses instead of spinning.
func (d *Drainer) giveBackUnstarted(ctx context.Context, job *queue.Claimed) {
	d.m.dispatch.WithLabelValues(d.label(job.Envelope.Tenant), "start_failed").Inc()
	t := time.NewTimer(startRetryPause)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	d.giveBack(job)
}

// settle runs a finishing call (finish, defer, release) with its own
// deadline, so it also runs while the drainer stops, and stops holding the
// job. A lost lease is counted, not an error: the job comes again. A call
// that got no reply (queue.ErrNoReply: Redis down or slow) is sent again
// every settleRetry while the job stays held, its lease kept, until it is
// answered, for at most the lease (then the lease is gone either way) or
// until the drainer stops. Before, the job was let go at once: its lease
// expired and it was delivered again, about a lease later, after every
// Redis blip (a hostile probe: 76 of 1,280 jobs twice after a 2-s restart).
// A send again that finds the lease gone is not a lost delivery: the first
// send may have settled it.
func (d *Drainer) settle(job *queue.Claimed, call func(context.Context) error, op string) {
	d.held.settling(job.Envelope.Tenant, job)
	defer d.held.remove(job.Envelope.Tenant, job)
	again, err := d.settleCall(job, call, op)
	switch {
	case err == nil:
	case again && errors.Is(err, queue.ErrLeaseLost):
		d.log.Info("drainer: settle sent again found no lease: settled by its first send, or the job comes again", "op", op, "tenant", job.Envelope.Tenant, "job_id", job.Envelope.ID)
	case errors.Is(err, queue.ErrLeaseLost):
		d.m.leaseLost.Inc()
		d.log.Info("drainer: lease lost; the job will be delivered again", "op", op, "tenant", job.Envelope.Tenant, "job_id", job.Envelope.ID)
	default:
		if !again { // a settle sent again counted its error at its first send
			d.m.errors.WithLabelValues(op).Inc()
		}
		d.log.Warn("drainer: settle job; its lease will expire and it will be delivered again", "op", op, "tenant", job.Envelope.Tenant, "job_id", job.Envelope.ID, "err", err)
	}
}

// settleRetry is how often a settle that got no reply is sent again.
const settleRetry = 500 * time.Millisecond

// settleCall runs a settle's call, sending it again while it gets no reply
// (queue.ErrNoReply; see settle), and reports whether it was sent again.
func (d *Drainer) settleCall(job *queue.Claimed, call func(context.Context) error, op string) (again bool, err error) {
	giveUp := time.Now().Add(d.cfg.Settings.Lease)
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		err = call(ctx)
		cancel()
		if !errors.Is(err, queue.ErrNoReply) || d.stopping.Load() || !time.Now().Add(settleRetry).Before(giveUp) {
			return try > 0, err
		}
		if try == 0 {
			d.m.errors.WithLabelValues(op).Inc() // once per settle, not per send
		}
		d.fails.q.Warn("settle/"+job.Envelope.Tenant, "drainer: settle got no reply; sent again while the job's lease is kept",
			"op", op, "tenant", job.Envelope.Tenant, "job_id", job.Envelope.ID, "err", err)
		time.Sleep(settleRetry)
	}
}
