package kafkaq

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/quietlog"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/limits"
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
	// stateChunk bounds the jobs of one job_state_enqueue.lua call, and
	// retryStates the states one retry writes (the rest wait for the next).
	stateChunk  = 500
	retryStates = 5_000
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
	return &backlog{rdb: rdb, log: log, quiet: quietlog.New(log, nil, quietEvery), errs: errs, stateErrs: stateErrs, topic: topic,
		held: newCounts(), stop: make(chan struct{}), done: make(chan struct{})}, nil
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
	quiet     *quietlog.Log // the failures of a Redis outage: one line per message and tenant per quietEvery
	errs      prometheus.Counter
	stateErrs prometheus.Counter
	topic     string

	mu         sync.Mutex
	held       counts
	started    bool // the retry loop runs (from the first hold on)
	closed     bool
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
// The sum stops at limits.MaxCost (limits.AddCost), the most the post-ack
// script takes as an exact integer, so it never wraps; past it the counter
// is raised by MaxCost and reads low by the rest, which it cannot hold
// anyway.
func (c *counts) addJob(t string, cost int64, st *jobstate.QueuedJob) {
	if _, ok := c.cost[t]; !ok {
		c.order = append(c.order, t)
		c.cost[t] = 0
	}
	sum, ok := limits.AddCost(c.cost[t], cost)
	if !ok {
		sum = limits.MaxCost
	}
	c.cost[t] = sum
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
			st = &jobstate.QueuedJob{ID: j.ID, Type: j.Type, EnqueuedAt: j.EnqueuedAt, Cost: j.Cost, HeartbeatMS: j.HeartbeatMS}
		}
		c.addJob(string(msgs[i].key), msgs[i].cost, st)
	}
	k.hold(k.write(c, true))
}

// write writes c in one pipelined round trip and returns what failed and
// surely did not reach Redis (a write that may have been applied, a
// timeout, is not written again: counting it twice would be worse); loud
// logs each failure (the retry loop's are quiet).
func (k *backlog) write(c counts, loud bool) counts {
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	parts := postAckParts(c)
	failed := newCounts()
	if len(parts) == 0 {
		return failed
	}
	calls := make([]lua.Call, len(parts))
	for i, p := range parts {
		calls[i] = jobstate.EnqueueCall(p.tenant, p.raise, p.jobs)
	}
	for i, cmd := range lua.Exec(ctx, k.rdb, calls, nil) {
		p := parts[i]
		err := enqueued(cmd, len(p.jobs))
		if err == nil {
			continue
		}
		if p.raise > 0 {
			k.failed(loud, k.errs, "backlog counter not raised after kafka ack; the jobs are queued", p.tenant, err)
			if lua.NeverSent(err) {
				failed.addJob(p.tenant, p.raise, nil)
			}
		}
		if len(p.jobs) > 0 {
			k.failed(loud, k.stateErrs, "job states not recorded after kafka ack; the jobs are queued", p.tenant, err)
			for _, st := range p.jobs {
				failed.addJob(p.tenant, 0, &st) // the script is idempotent for a job already recorded
			}
		}
	}
	return failed
}

// postAckPart is one job_state_enqueue.lua call of a post-ack write: a
// tenant's backlog raise (on its first call only) and up to stateChunk of
// its job states.
type postAckPart struct {
	tenant string
	raise  int64
	jobs   []jobstate.QueuedJob
}

// postAckParts splits c into its calls, in c's tenant order: per tenant
// one call with the raise and the first stateChunk states, then one per
// further chunk; a raise without states is a call of its own, a tenant
// with neither has none.
func postAckParts(c counts) []postAckPart {
	parts := make([]postAckPart, 0, len(c.order))
	for _, t := range c.order {
		raise, js := c.cost[t], c.states[t]
		for raise > 0 || len(js) > 0 {
			n := min(len(js), stateChunk)
			parts = append(parts, postAckPart{tenant: t, raise: raise, jobs: js[:n]})
			raise, js = 0, js[n:]
		}
	}
	return parts
}

// failed counts and (when loud) logs one failed write of tenant's counts,
// at most one line per message and tenant per quietEvery.
func (k *backlog) failed(loud bool, n prometheus.Counter, msg, tenant string, err error) {
	if !loud {
		return
	}
	n.Inc()
	k.quiet.Warn(msg+"\x00"+tenant, msg+"; held and written again when Redis takes it", "topic", k.topic, "tenant", tenant, "err", err)
}

// hold keeps f for the retry loop, within maxHeldStates, starting the loop
// the first time.
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
	if !k.started && !k.closed {
		k.started = true
		go k.retry()
	}
}

// take removes from what is held the counts and at most retryStates states
// for one write.
func (k *backlog) take() counts {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, rest := k.held, newCounts()
	if c.jobs > retryStates {
		n := 0
		for _, t := range c.order {
			js := c.states[t]
			keep := min(len(js), max(0, retryStates-n))
			n += keep
			for _, st := range js[keep:] {
				rest.addJob(t, 0, &st)
			}
			c.states[t] = js[:keep]
		}
	}
	k.held = rest
	return c
}

// retry writes the held counts and states every backlogRetry until close,
// quietly (the first failure was logged and counted).
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
		if c := k.take(); len(c.order) > 0 {
			f := k.write(c, false)
			k.hold(f)
			if len(f.order) == 0 {
				k.log.Info("held backlog counts and job states written after a Redis outage", "topic", k.topic, "tenants", len(c.order))
			}
		}
	}
}

// close stops the retry loop after one last try of what it holds. A second
// call does nothing.
func (k *backlog) close() {
	k.mu.Lock()
	started, closed := k.started, k.closed
	k.closed = true
	k.mu.Unlock()
	if closed {
		return
	}
	close(k.stop)
	if started {
		<-k.done
	}
	k.mu.Lock()
	c := k.held
	k.held = newCounts()
	k.mu.Unlock()
	if len(c.order) > 0 {
		if f := k.write(c, true); len(f.order) > 0 {
			k.log.Error("producer closed with backlog counts Redis did not take; those tenants' counters stay low until they expire",
				"topic", k.topic, "tenants", len(f.order))
		}
	}
}

// enqueued is the error of a job_state_enqueue.lua call: Redis's, or a
// reply jobstate.EnqueueReply refuses for a call of jobs jobs.
func enqueued(cmd *redis.Cmd, jobs int) error {
	v, err := cmd.Result()
	if err != nil {
		return err
	}
	_, err = jobstate.EnqueueReply(v, jobs)
	return err
}
