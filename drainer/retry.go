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

// settleRetry is how often a settle that got no reply is sent again.
const settleRetry = 500 * time.Millisecond

// settleCall runs a settle's call, sending it again while it gets no reply
// (queue.ErrNoReply; see settle), and reports whether it was sent again.
func (d *Drainer) settleCall(job *queue.Claimed, call func(context.Context) error, op string) (err error, again bool) {
	giveUp := time.Now().Add(d.cfg.Settings.Lease)
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		err = call(ctx)
		cancel()
		if !errors.Is(err, queue.ErrNoReply) || d.stopping.Load() || !time.Now().Add(settleRetry).Before(giveUp) {
			return err, try > 0
		}
		d.m.errors.WithLabelValues(op).Inc()
		d.fails.q.Warn("settle/"+job.Envelope.Tenant, "drainer: settle got no reply; sent again while the job's lease is kept",
			"op", op, "tenant", job.Envelope.Tenant, "job_id", job.Envelope.ID, "err", err)
		time.Sleep(settleRetry)
	}
}
