package kafkaq

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue/internal/metrics"
)

// Bounds of what a backlog holds back while Redis is down (see backlog).
const (
	// backlogRetry is how often held-back counts and states are written
	// again: the counters are right again within backlogRetry (plus one
	// write) of Redis coming back.
	backlogRetry = 500 * time.Millisecond
	// maxHeldStates bounds the job states held back (the counts are numbers
	// and always held); past it a job's state is dropped, counted in
	// sluice_redis_errors_total{op="job_state_queued"}.
	maxHeldStates = 100_000
)

// newBacklog returns the backlog counter writer of topic's producer on rdb,
// its failures counted in sluice_redis_errors_total{op="backlog_incr"} and
// {op="job_state_queued"}, and starts its retry loop (stopped by close).
func newBacklog(rdb redis.UniversalClient, log *slog.Logger, reg prometheus.Registerer, topic string) (*backlog, error) {
	errs, err := metrics.RedisErrors(reg, "backlog_incr")
	if err != nil {
		return nil, err
	}
	stateErrs, err := metrics.RedisErrors(reg, "job_state_queued")
	if err != nil {
		return nil, err
	}
	k := &backlog{rdb: rdb, log: log, errs: errs, stateErrs: stateErrs, topic: topic,
		held: newCounts(), stop: make(chan struct{}), done: make(chan struct{})}
	go k.retry()
	return k, nil
}

// backlog raises the tenants' backlog counters for the jobs of one
// acknowledged produce request, and records the jobs' state "queued". What
// it cannot write (Redis down: the jobs are in Kafka, admitted fail-open)
// it holds and writes again every backlogRetry until Redis takes it, so the
// counters are reconciled within about a second of Redis' return. Held
// counts live in this process only: an ingest that stops while Redis is down
// loses them (the counter stays low by them until it expires).
type backlog struct {
	rdb       redis.UniversalClient
	log       *slog.Logger
	errs      prometheus.Counter
	stateErrs prometheus.Counter
	topic     string

	mu         sync.Mutex
	held       counts
	stop, done chan struct{}
}

// counts are backlog increments and job states to write, per tenant.
type counts struct {
	cost   map[string]int64
	states map[string][]jobstate.QueuedJob
	order  []string
	jobs   int // states held
}

func newCounts() counts {
	return counts{cost: map[string]int64{}, states: map[string][]jobstate.QueuedJob{}}
}

// addJob adds cost (and the job's state when st is not nil) for tenant t.
func (c *counts) addJob(t string, cost int64, st *jobstate.QueuedJob) {
	if _, ok := c.cost[t]; !ok {
		c.order = append(c.order, t)
		c.cost[t] = 0
	}
	c.cost[t] += cost
	if st != nil {
		c.states[t] = append(c.states[t], *st)
		c.jobs++
	}
}

// add raises each tenant's backlog counter by the cost of its jobs in msgs
// and refreshes its TTL, and records each job as queued with the next seq of
// its tenant (jobstate.EnqueueCall), in one pipelined round trip per produce
// request (not per call), bounded by backlogTimeout. It counts every
// acknowledged job, also one whose caller gave up meanwhile. A failure is
// logged and counted, not returned (the jobs are durable), and what failed
// is held for the retry loop.
func (k *backlog) add(msgs []message) {
	c := newCounts()
	for i := range msgs {
		var st *jobstate.QueuedJob
		if j := msgs[i].job; j != nil {
			st = &jobstate.QueuedJob{ID: j.ID, Type: j.Type, EnqueuedAt: j.EnqueuedAt, Cost: j.Cost}
		}
		c.addJob(string(msgs[i].key), msgs[i].cost, st)
	}
	k.hold(k.write(c))
}

// write writes c in one pipelined round trip and returns what failed.
func (k *backlog) write(c counts) counts {
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	tenants := make([]string, 0, len(c.states))
	calls := make([]lua.Call, 0, len(c.states))
	for _, t := range c.order {
		if js := c.states[t]; len(js) > 0 {
			tenants = append(tenants, t)
			calls = append(calls, jobstate.EnqueueCall(t, js))
		}
	}
	incrs := make([]*redis.IntCmd, 0, len(c.order))
	stateCmds := lua.Exec(ctx, k.rdb, calls, func(pipe redis.Pipeliner) {
		for _, t := range c.order {
			incrs = append(incrs, pipe.IncrBy(ctx, keys.Backlog(t), c.cost[t]))
			pipe.PExpire(ctx, keys.Backlog(t), keys.BacklogTTL)
		}
	})
	failed := newCounts()
	for i, cmd := range incrs {
		if err := cmd.Err(); err != nil {
			failed.addJob(c.order[i], c.cost[c.order[i]], nil)
			k.errs.Inc()
			k.log.Error("backlog counter not raised after kafka ack; the jobs are queued, the count is held and retried",
				"topic", k.topic, "tenant", c.order[i], "err", err)
		}
	}
	for i, cmd := range stateCmds {
		if err := enqueued(cmd); err != nil {
			for _, st := range c.states[tenants[i]] {
				failed.addJob(tenants[i], 0, &st)
			}
			k.stateErrs.Inc()
			k.log.Warn("job states not recorded after kafka ack; the jobs are queued, their states are held and retried",
				"topic", k.topic, "jobs", len(c.states[tenants[i]]), "err", err)
		}
	}
	return failed
}

// hold keeps f for the retry loop, within maxHeldStates.
func (k *backlog) hold(f counts) {
	if len(f.order) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, t := range f.order {
		k.held.addJob(t, f.cost[t], nil)
		for _, st := range f.states[t] {
			if k.held.jobs >= maxHeldStates {
				k.stateErrs.Inc()
				continue
			}
			k.held.addJob(t, 0, &st)
		}
	}
}

// retry writes the held counts and states every backlogRetry until close.
func (k *backlog) retry() {
	defer close(k.done)
	tick := time.NewTicker(backlogRetry)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-tick.C:
		}
		k.mu.Lock()
		c := k.held
		k.held = newCounts()
		k.mu.Unlock()
		if len(c.order) > 0 {
			k.hold(k.write(c))
		}
	}
}

// close stops the retry loop after one last try of what it holds.
func (k *backlog) close() {
	close(k.stop)
	<-k.done
	k.mu.Lock()
	c := k.held
	k.held = newCounts()
	k.mu.Unlock()
	if len(c.order) > 0 {
		if f := k.write(c); len(f.order) > 0 {
			k.log.Error("producer closed with backlog counts Redis did not take; those tenants' counters stay low until they expire",
				"topic", k.topic, "tenants", len(f.order))
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
