package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// RedisConsumerConfig configures a RedisConsumer.
type RedisConsumerConfig struct {
	// Lease is how long a claimed job stays leased without Extend before a
	// reaper returns it to the queue (default 30s).
	Lease time.Duration
	// Poll is how long Claim tells the caller to wait when a tenant's queue
	// is empty and no retry falls due sooner (default 100ms).
	Poll time.Duration
	// Tenants are always listed by Tenants (the configured tenants); tenants
	// with keys in Redis are found by SCAN in addition.
	Tenants []string
}

// RedisConsumer drains the Redis list backend: one list per tenant
// (keys.Queue, jobs RPUSHed by the producer, taken from the head). A claim
// moves the head job into a lease: the processing set (keys.Processing,
// scored by lease deadline in Redis TIME ms) and the leased hash
// (keys.Leased), atomically (lua/claim.lua). Finish removes the lease and
// lowers the backlog (lua/ack.lua); Defer moves the job into the delayed set
// (keys.Delayed) from which claims move it back to the head when due; Reap
// returns expired leases to the head (lua/reap.lua). A job is thus always in
// exactly one of queue, lease or delayed set until finished, so a drainer's
// death loses nothing. Safe for concurrent use.
type RedisConsumer struct {
	rdb      redis.UniversalClient
	cfg      RedisConsumerConfig
	prefix   string        // unique per consumer, part of every lease token
	seq      atomic.Uint64 // lease token counter
	finishes *lua.Group
}

// finishPipelines is how many pipelines of Finish calls may be in flight
// at once; the Finishes that arrive meanwhile leave together in the next
// (lua.Group), each still its own ack.lua. A shared pipeline is
// bounded by finishTimeout.
const (
	finishPipelines = 2
	finishTimeout   = 5 * time.Second
)

// NewRedisConsumer returns a consumer of rdb's tenant lists.
func NewRedisConsumer(rdb redis.UniversalClient, cfg RedisConsumerConfig) *RedisConsumer {
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &RedisConsumer{rdb: rdb, cfg: cfg, prefix: hex.EncodeToString(b),
		finishes: lua.NewGroup(rdb, finishPipelines, finishTimeout)}
}

// Tenants returns the configured tenants plus every tenant with a queue,
// lease or delayed set in Redis (SCAN on every master of a cluster), sorted.
func (c *RedisConsumer) Tenants(ctx context.Context) ([]string, error) {
	var mu sync.Mutex
	seen := make(map[string]bool, len(c.cfg.Tenants))
	for _, t := range c.cfg.Tenants {
		seen[t] = true
	}
	scan := func(ctx context.Context, n *redis.Client) error {
		for _, pat := range []string{keys.Queue("*"), keys.Processing("*"), keys.Delayed("*")} {
			it := n.Scan(ctx, 0, pat, 1000).Iterator()
			for it.Next(ctx) {
				if t, ok := tenantOfKey(it.Val()); ok {
					mu.Lock()
					seen[t] = true
					mu.Unlock()
				}
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	switch r := c.rdb.(type) {
	case *redis.ClusterClient:
		err = r.ForEachMaster(ctx, scan) // runs the nodes in parallel
	case *redis.Client:
		err = scan(ctx, r)
	default:
		err = fmt.Errorf("unsupported client %T", c.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: redis tenants: %w: %w", ErrUnavailable, err)
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

// tenantOfKey returns the tenant in "sluice:{tenant}:..." when it is valid.
func tenantOfKey(k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, keys.Prefix+"{")
	if !ok {
		return "", false
	}
	t, _, ok := strings.Cut(rest, "}")
	if !ok || !keys.ValidTenant(t) {
		return "", false
	}
	return t, true
}

// promoteMax bounds how many due retries one claim moves to the queue head.
const promoteMax = 100

// Claim leases the head job of tenant's queue, first moving due retries to
// the head. With no job it returns nil and the time until the next retry
// falls due, or the poll interval, whichever is shorter.
func (c *RedisConsumer) Claim(ctx context.Context, tenant string) (*Claimed, time.Duration, error) {
	return c.claimAt(ctx, tenant, 0)
}

func (c *RedisConsumer) claimAt(ctx context.Context, tenant string, nowMS int64) (*Claimed, time.Duration, error) {
	token := c.prefix + "." + strconv.FormatUint(c.seq.Add(1), 36)
	res, err := lua.Claim.Run(ctx, c.rdb,
		[]string{keys.Queue(tenant), keys.Processing(tenant), keys.Leased(tenant), keys.Delayed(tenant)},
		nowMS, c.cfg.Lease.Milliseconds(), token, keys.QueueTTL.Milliseconds(), promoteMax, keys.JobState(tenant, ""),
	).Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("queue: claim %s: %w: %w", tenant, ErrUnavailable, err)
	}
	if len(res) != 4 {
		return nil, 0, fmt.Errorf("queue: claim %s: reply has %d values, want 4", tenant, len(res))
	}
	member, ok1 := res[0].(string)
	raw, ok2 := res[1].(string)
	cancelled, ok3 := res[2].(int64)
	nextDue, ok4 := res[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil, 0, fmt.Errorf("queue: claim %s: reply types %T %T %T %T", tenant, res[0], res[1], res[2], res[3])
	}
	if member == "" {
		wait := c.cfg.Poll
		if nextDue >= 0 {
			now := nowMS
			if now == 0 {
				now = time.Now().UnixMilli()
			}
			if d := time.Duration(nextDue-now) * time.Millisecond; d < wait {
				wait = max(d, 0)
			}
		}
		return nil, wait, nil
	}
	job := &Claimed{Raw: []byte(raw), Cancelled: cancelled == 1, member: member}
	env, derr := Decode(job.Raw)
	if derr == nil && env.Tenant != tenant {
		derr = fmt.Errorf("queue: job %s of tenant %q found in the queue of %q", env.ID, env.Tenant, tenant)
	}
	if derr != nil {
		job.DecodeErr = derr
		env = Envelope{Version: EnvelopeVersion, ID: strings.SplitN(member, "|", 2)[0], Tenant: tenant, Cost: 1}
	}
	if env.Cost < 1 {
		env.Cost = 1
	}
	job.Envelope = env
	return job, 0, nil
}

// Extend pushes the deadline of the leases of jobs (all of tenant) to now +
// Lease and returns the jobs whose lease was already lost.
func (c *RedisConsumer) Extend(ctx context.Context, tenant string, jobs []*Claimed) ([]*Claimed, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(jobs)+2)
	args = append(args, 0, c.cfg.Lease.Milliseconds())
	byMember := make(map[string]*Claimed, len(jobs))
	for _, j := range jobs {
		args = append(args, j.member)
		byMember[j.member] = j
	}
	lost, err := lua.LeaseExtend.Run(ctx, c.rdb, []string{keys.Processing(tenant)}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("queue: extend %d leases of %s: %w: %w", len(jobs), tenant, ErrUnavailable, err)
	}
	out := make([]*Claimed, 0, len(lost))
	for _, m := range lost {
		if j, ok := byMember[m]; ok {
			out = append(out, j)
		}
	}
	return out, nil
}

// Finish ends the job's lease, pushes dead (when not nil) onto the tenant's
// dead-letter list keys.DLQ, lowers the backlog by the job's cost and
// records the job's state (dead, job.Dropped, or done; package jobstate), in
// one script. It returns ErrLeaseLost when the lease had expired and the job
// was returned to the queue. Concurrent Finishes share round trips
// (finishPipelines).
func (c *RedisConsumer) Finish(ctx context.Context, job *Claimed, dead *DeadLetter) error {
	t := job.Envelope.Tenant
	rec := ""
	if dead != nil {
		d := *dead
		d.Job = json.RawMessage(job.Raw)
		if !json.Valid(job.Raw) {
			b, _ := json.Marshal(string(job.Raw))
			d.Job = b
		}
		b, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("queue: finish %s: encode dead letter: %w", job.Envelope.ID, err)
		}
		rec = string(b)
	}
	state, lastErr, reason := finishState(job, dead)
	v, err := c.finishes.Do(ctx, lua.Call{
		Script: lua.Ack,
		Keys: []string{keys.Processing(t), keys.Leased(t), keys.Backlog(t), keys.DLQ(t),
			keys.JobState(t, job.Envelope.ID), keys.JobsDispatched(t), keys.Delivering(t)},
		Args: []any{job.member, job.Envelope.Cost, keys.BacklogTTL.Milliseconds(), keys.QueueTTL.Milliseconds(), rec,
			state, lastErr, reason, keys.JobStateTTL.Milliseconds()},
	})
	if err != nil {
		return fmt.Errorf("queue: finish %s: %w: %w", job.Envelope.ID, ErrUnavailable, err)
	}
	switch n, ok := v.(int64); {
	case !ok || (n != 0 && n != 1):
		// Not known to be finished: the lease expires and the job comes
		// again (at least once), never lost to a reply read as success.
		return fmt.Errorf("queue: finish %s: ack.lua answered %T %v, want 1 or 0", job.Envelope.ID, v, v)
	case n == 0:
		return fmt.Errorf("queue: finish %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	return nil
}

// finishState is the state Finish records for job (package jobstate): dead
// with the dead letter's reason and error, else job.Dropped, else done.
func finishState(job *Claimed, dead *DeadLetter) (state, lastErr, reason string) {
	switch {
	case dead != nil:
		return jobstate.Dead, dead.Error, dead.Reason
	case job.Dropped != "":
		return job.Dropped, "", ""
	}
	return jobstate.Done, "", ""
}

// Defer ends the job's lease and puts next (the job with its attempt count
// updated) into the tenant's delayed set, due after delay, and records the
// job's state retrying with job.LastError, in one script; a later Claim
// moves it back to the head of the queue.
func (c *RedisConsumer) Defer(ctx context.Context, job *Claimed, delay time.Duration, next Envelope) error {
	t := job.Envelope.Tenant
	b, err := next.Encode()
	if err != nil {
		return fmt.Errorf("queue: defer %s: %w", job.Envelope.ID, err)
	}
	due, err := lua.LeaseDefer.Run(ctx, c.rdb,
		[]string{keys.Processing(t), keys.Leased(t), keys.Delayed(t),
			keys.JobState(t, job.Envelope.ID), keys.Delivering(t)},
		job.member, max(delay.Milliseconds(), 0), b, keys.QueueTTL.Milliseconds(), 0,
		job.LastError, keys.JobStateTTL.Milliseconds(),
	).Int64()
	if err != nil {
		return fmt.Errorf("queue: defer %s: %w: %w", job.Envelope.ID, ErrUnavailable, err)
	}
	if due == 0 {
		return fmt.Errorf("queue: defer %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	return nil
}

// Release ends the job's lease and puts it back at the head of its queue.
func (c *RedisConsumer) Release(ctx context.Context, job *Claimed) error {
	t := job.Envelope.Tenant
	n, err := lua.Release.Run(ctx, c.rdb,
		[]string{keys.Processing(t), keys.Leased(t), keys.Queue(t)},
		job.member, job.Raw, keys.QueueTTL.Milliseconds(),
	).Int64()
	if err != nil {
		return fmt.Errorf("queue: release %s: %w: %w", job.Envelope.ID, ErrUnavailable, err)
	}
	if n == 0 {
		return fmt.Errorf("queue: release %s: %w", job.Envelope.ID, ErrLeaseLost)
	}
	if n != 1 {
		return fmt.Errorf("queue: release %s: release.lua answered %d, want 1 or 0", job.Envelope.ID, n)
	}
	return nil
}

// reapMax bounds how many expired leases one Reap call returns.
const reapMax = 1000

// Reap returns tenant's expired leases (deadline before Redis TIME) to the
// head of its queue and reports how many it returned.
func (c *RedisConsumer) Reap(ctx context.Context, tenant string) (int, error) {
	return c.reapAt(ctx, tenant, 0)
}

func (c *RedisConsumer) reapAt(ctx context.Context, tenant string, nowMS int64) (int, error) {
	n, err := lua.Reap.Run(ctx, c.rdb,
		[]string{keys.Processing(tenant), keys.Leased(tenant), keys.Queue(tenant)},
		nowMS, reapMax, keys.QueueTTL.Milliseconds(),
	).Int64()
	if err != nil {
		return 0, fmt.Errorf("queue: reap %s: %w: %w", tenant, ErrUnavailable, err)
	}
	return int(n), nil
}
