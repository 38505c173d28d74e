package scheduler

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// maxRounds bounds the moves of one tenant per tick (Batch jobs each).
const maxRounds = 10

// move moves tenant's due jobs onto the queue, Batch at a time, then sets
// its hint to its next due time. It returns how many it moved.
func (s *Scheduler) move(ctx context.Context, tenant string) (total int64) {
	for range maxRounds {
		r, err := s.take(ctx, tenant, s.cfg.Batch)
		if err != nil {
			s.fail(ctx, "take", tenant, err)
			return total
		}
		if len(r.Jobs) == 0 {
			s.setHint(ctx, tenant, r.NextMS)
			return total
		}
		moved, next, err := s.enqueue(ctx, tenant, r.Jobs)
		if err != nil {
			// The moves stay leased: the next take after Lease retries them.
			s.fail(ctx, "enqueue", tenant, err)
			s.setHint(ctx, tenant, r.NextMS)
			return total
		}
		total += moved
		s.m.moved.WithLabelValues(tenant).Add(float64(moved))
		s.m.setScheduled(tenant, r.Count-int64(len(r.Jobs)), true)
		s.setHint(ctx, tenant, next)
		if len(r.Jobs) < s.cfg.Batch {
			return total
		}
	}
	return total
}

// take runs schedule_take.lua for up to max of tenant's due jobs.
func (s *Scheduler) take(ctx context.Context, tenant string, max int) (takeReply, error) {
	v, err := takeCall(tenant, max, s.cfg.Lease).Run(ctx, s.cfg.Redis).Result()
	if err != nil {
		return takeReply{}, fmt.Errorf("scheduler: take jobs of %s: %w", tenant, err)
	}
	r, err := parseTake(v)
	if err != nil {
		return takeReply{}, fmt.Errorf("scheduler: take jobs of %s: %w", tenant, err)
	}
	return r, nil
}

// enqueue hands the taken jobs to the Producer and ends their moves
// (schedule_done.lua), returning how many were moved and the tenant's next
// due time. A job that cannot go onto the queue, whose envelope does not
// decode (or belongs to another tenant) or that the Producer refuses
// (queue.Checker: larger than a Kafka request takes), is logged and
// counted, and its move ends with its dead letter (reason poison), so it is
// listed in the DLQ and never blocks the tenant's other moves.
func (s *Scheduler) enqueue(ctx context.Context, tenant string, jobs []taken) (moved, nextMS int64, err error) {
	envs := make([]queue.Envelope, 0, len(jobs))
	done := make([]doneJob, 0, len(jobs))
	check, _ := s.cfg.Producer.(queue.Checker)
	for _, j := range jobs {
		env, err := queue.Decode([]byte(j.Envelope))
		op := "decode"
		if err == nil && (env.Tenant != tenant || env.ID != j.ID) {
			err = fmt.Errorf("scheduler: job %s of tenant %q stored as %s of %q", env.ID, env.Tenant, j.ID, tenant)
		}
		if err == nil && check != nil {
			if err = check.Check([]queue.Envelope{env}); err != nil {
				op = "refused"
			}
		}
		if err != nil {
			s.m.errors.WithLabelValues(op).Inc()
			s.cfg.Logger.Error("scheduler: scheduled job cannot go onto the queue; dead-lettered", "tenant", tenant, "job_id", j.ID, "err", err)
			done = append(done, doneJob{ID: j.ID, Dead: s.deadLetter(j, err)})
			continue
		}
		d := doneJob{ID: j.ID, HeartbeatMS: env.HeartbeatMS}
		if env.NotBefore != nil {
			d.DueMS = env.NotBefore.UnixMilli()
		}
		envs = append(envs, env)
		done = append(done, d)
	}
	if len(envs) > 0 {
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
		err := s.cfg.Producer.Enqueue(ectx, envs)
		cancel()
		if err != nil {
			return 0, 0, fmt.Errorf("scheduler: enqueue %d jobs of %s: %w", len(envs), tenant, err)
		}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
	defer cancel()
	v, err := doneCall(tenant, done).Run(dctx, s.cfg.Redis).Result()
	if err == nil {
		moved, nextMS, err = parseDone(v)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("scheduler: end moves of %s: %w", tenant, err)
	}
	return moved, nextMS, nil
}

// deadLetter is the dead letter of the taken job j that cannot go onto the
// queue for cause: reason poison, the job as it was stored.
func (s *Scheduler) deadLetter(j taken, cause error) string {
	rec, err := dlq.Encode(queue.DeadLetter{Reason: "poison", Error: cause.Error(), At: s.clock.Now().UTC()}, []byte(j.Envelope))
	if err != nil { // a DeadLetter of strings always encodes; keep a letter anyway
		rec = fmt.Sprintf(`{"reason":"poison","error":%q,"attempts":0}`, cause.Error())
	}
	return rec
}

// setHint sets tenant's hint to nextMS (removes it when -1), then reads the
// tenant's next due time once more and lowers the hint to it: a job Add
// stored between the take and the hint write (whose ZADD LT the write may
// have overwritten) is seen by that read, and one stored after it lowers
// the new hint itself.
func (s *Scheduler) setHint(ctx context.Context, tenant string, nextMS int64) {
	rdb, k := s.cfg.Redis, keys.ScheduledTenants()
	var err error
	if nextMS < 0 {
		err = rdb.ZRem(ctx, k, tenant).Err()
	} else {
		err = rdb.ZAdd(ctx, k, redis.Z{Score: float64(nextMS), Member: tenant}).Err()
	}
	if err != nil {
		s.fail(ctx, "hint", tenant, err)
		return
	}
	r, err := s.take(ctx, tenant, 0)
	if err != nil {
		s.fail(ctx, "hint", tenant, err)
		return
	}
	if r.NextMS >= 0 && (nextMS < 0 || r.NextMS < nextMS) {
		if err := lowerHint(ctx, rdb, tenant, r.NextMS); err != nil {
			s.fail(ctx, "hint", tenant, err)
		}
	}
}

// metrics are the scheduler's.
type metrics struct {
	scheduled *prometheus.GaugeVec   // tenant
	moved     *prometheus.CounterVec // tenant
	errors    *prometheus.CounterVec // op
	shown     map[string]bool        // tenants with a scheduled series (Run's goroutine only)
}

// setScheduled sets tenant's sluice_jobs_scheduled to n. A sweep's 0
// (orZero false) creates no series: a tenant that never had a scheduled
// job shows none, so 10,000 configured tenants cost no series.
func (m *metrics) setScheduled(tenant string, n int64, orZero bool) {
	if n <= 0 && !orZero && !m.shown[tenant] {
		return
	}
	m.shown[tenant] = true
	m.scheduled.WithLabelValues(tenant).Set(float64(max(n, 0)))
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		shown: map[string]bool{},
		scheduled: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_jobs_scheduled",
			Help: "The tenant's scheduled jobs not yet due (or being moved), as last read by this drainer's scheduler."}, []string{"tenant"}),
		moved: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_scheduled_moved_total",
			Help: "Scheduled jobs this drainer's scheduler moved onto the queue when due."}, []string{"tenant"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_scheduler_errors_total",
			Help: "Failed scheduler steps, by op (due, take, enqueue, decode, refused, hint, sweep); decode and refused count jobs dead-lettered because they cannot go onto the queue."}, []string{"op"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.scheduled, m.moved, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("scheduler: register metrics: %w", err)
		}
	}
	return m, nil
}
