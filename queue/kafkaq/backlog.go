package kafkaq

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue/internal/metrics"
)

// newBacklog returns the backlog counter writer of topic's producer on rdb,
// its failures counted in sluice_redis_errors_total{op="backlog_incr"} and
// {op="job_state_queued"}.
func newBacklog(rdb redis.UniversalClient, log *slog.Logger, reg prometheus.Registerer, topic string) (*backlog, error) {
	errs, err := metrics.RedisErrors(reg, "backlog_incr")
	if err != nil {
		return nil, err
	}
	stateErrs, err := metrics.RedisErrors(reg, "job_state_queued")
	if err != nil {
		return nil, err
	}
	return &backlog{rdb: rdb, log: log, errs: errs, stateErrs: stateErrs, topic: topic}, nil
}

// backlog raises the tenants' backlog counters for the jobs of one
// acknowledged produce request, and records the jobs' state "queued".
type backlog struct {
	rdb       redis.UniversalClient
	log       *slog.Logger
	errs      prometheus.Counter
	stateErrs prometheus.Counter
	topic     string
}

// add raises each tenant's backlog counter by the cost of its jobs in msgs
// and refreshes its TTL, and records each job as queued with the next seq of
// its tenant (jobstate.EnqueueCall), in one pipelined round trip per produce
// request (not per call), bounded by backlogTimeout. It counts every
// acknowledged job, also one whose caller gave up meanwhile. A failure is
// logged and counted, not returned: the jobs are durable.
func (k *backlog) add(msgs []message) {
	cost := make(map[string]int64, 1)
	var order []string
	states := make(map[string][]jobstate.QueuedJob, 1)
	for i := range msgs {
		t := string(msgs[i].key)
		if _, ok := cost[t]; !ok {
			order = append(order, t)
		}
		cost[t] += msgs[i].cost
		if j := msgs[i].job; j != nil {
			states[t] = append(states[t], jobstate.QueuedJob{ID: j.ID, Type: j.Type, EnqueuedAt: j.EnqueuedAt, Cost: j.Cost})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	calls := make([]lua.Call, 0, len(states))
	for _, tenant := range order {
		if js := states[tenant]; len(js) > 0 {
			calls = append(calls, jobstate.EnqueueCall(tenant, js))
		}
	}
	incrs := make([]*redis.IntCmd, 0, len(order))
	stateCmds := lua.Exec(ctx, k.rdb, calls, func(pipe redis.Pipeliner) {
		for _, tenant := range order {
			key := keys.Backlog(tenant)
			incrs = append(incrs, pipe.IncrBy(ctx, key, cost[tenant]))
			pipe.PExpire(ctx, key, keys.BacklogTTL)
		}
	})
	for _, c := range incrs {
		if err := c.Err(); err != nil {
			k.errs.Inc()
			k.log.Error("backlog counter not raised after kafka ack; the jobs are queued",
				"topic", k.topic, "tenants", len(cost), "jobs", len(msgs), "err", err)
			break
		}
	}
	for i, c := range calls {
		if err := enqueued(stateCmds[i]); err != nil {
			k.stateErrs.Inc()
			k.log.Warn("job states not recorded after kafka ack; the jobs are queued",
				"topic", k.topic, "jobs", len(c.Keys)-2, "err", err)
		}
	}
}

// enqueued is the error of a job_state_enqueue.lua call: Redis's, or a
// reply jobstate.EnqueueReply refuses.
func enqueued(cmd *redis.Cmd) error {
	v, err := cmd.Result()
	if err != nil {
		return err
	}
	_, err = jobstate.EnqueueReply(v)
	return err
}
