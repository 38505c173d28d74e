package redisq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
)

// Defaults of ConsumerConfig.
const (
	DefaultLease = 30 * time.Second
	DefaultPoll  = 100 * time.Millisecond
)

// ConsumerConfig configures a Consumer. The zero value (with Redis set) is
// usable.
type ConsumerConfig struct {
	// Redis holds the queues. Required.
	Redis redis.UniversalClient
	// Lease is how long a claimed job stays leased without Extend before a
	// reaper returns it to the queue (default DefaultLease, 30s).
	Lease time.Duration
	// Poll is how long Claim tells the caller to wait when a tenant's queue
	// is empty and no retry falls due sooner (default DefaultPoll, 100ms).
	Poll time.Duration
	// Tenants are always listed by Tenants (the configured tenants); tenants
	// with keys in Redis are found by SCAN in addition.
	Tenants []string
	// Clock reads the time a claim's wait until the next retry is measured
	// from (default clock.Real); the scripts read Redis TIME.
	Clock clock.Clock
}

// Consumer drains the Redis list backend: one list per tenant (keys.Queue,
// jobs RPUSHed by the producer, taken from the head). A claim moves the head
// job into a lease: the processing set (keys.Processing, scored by lease
// deadline in Redis TIME ms) and the leased hash (keys.Leased), atomically
// (lua/claim.lua). Finish removes the lease and lowers the backlog
// (lua/ack.lua); Defer moves the job into the delayed set (keys.Delayed,
// lua/lease_defer.lua) from which claims move it back to the head when due;
// Reap returns expired leases to the head (lua/reap.lua). A job is thus
// always in exactly one of queue, lease or delayed set until finished, so a
// drainer's death loses nothing. Safe for concurrent use.
type Consumer struct {
	rdb      redis.UniversalClient
	cfg      ConsumerConfig
	clock    clock.Clock
	prefix   string        // unique per consumer, part of every lease token
	seq      atomic.Uint64 // lease token counter
	finishes *lua.Batcher[ackArgs, bool]
	takes    *lua.Group   // concurrent takes of all lanes, in shared pipelines
	refresh  keys.Refresh // once a second per tenant: TTLs and the done trim
	sweep    probeSweep   // which tenants Probe reads in full (probe.go)
	backlog  backlogKeys  // the counter keys Probe reads (probe.go)
}

// finishPipelines is how many pipelines of Finish calls may be in flight
// at once; the Finishes that arrive meanwhile leave together in the next
// (newFinishGroup), one ack.lua call per tenant. A shared pipeline is
// bounded by finishTimeout.
const (
	finishPipelines = 2
	finishTimeout   = 5 * time.Second
)

// takePipelines is how many pipelines of takes (take.lua) may be in flight
// at once: a lane's pull loops each have one while few lanes are busy, and
// many busy lanes share round trips (and the client's connections) instead
// of queueing for a connection each.
const takePipelines = 4

// NewConsumer returns a consumer of cfg.Redis's tenant lists.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Redis == nil {
		return nil, errors.New("redisq: consumer: Redis is required")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &Consumer{rdb: cfg.Redis, cfg: cfg, clock: clock.Or(cfg.Clock), prefix: hex.EncodeToString(b),
		finishes: newFinishGroup(cfg.Redis, finishPipelines, finishTimeout),
		takes:    lua.NewGroup(cfg.Redis, takePipelines, finishTimeout)}, nil
}

// Tenants returns the configured tenants plus every tenant with a queue,
// lease or delayed set in Redis (SCAN on every master of a cluster), sorted.
func (c *Consumer) Tenants(ctx context.Context) ([]string, error) {
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
		return nil, queue.Unavailable("redis tenants", err)
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

// Claim leases the head job of tenant's queue, first moving due retries to
// the head. With no job it returns nil and the time until the next retry
// falls due, or the poll interval, whichever is shorter.
func (c *Consumer) Claim(ctx context.Context, tenant string) (*queue.Claimed, time.Duration, error) {
	return c.claimAt(ctx, tenant, 0)
}

func (c *Consumer) claimAt(ctx context.Context, tenant string, nowMS int64) (*queue.Claimed, time.Duration, error) {
	token := c.prefix + "." + strconv.FormatUint(c.seq.Add(1), 36)
	v, err := claimArgs{Tenant: tenant, NowMS: nowMS, Lease: c.cfg.Lease, Token: token}.Call().Run(ctx, c.rdb).Result()
	if err != nil {
		return nil, 0, queue.Unavailable("claim "+tenant, err)
	}
	r, err := parseClaim(v)
	if err != nil {
		return nil, 0, fmt.Errorf("queue: claim %s: %w", tenant, err)
	}
	if r.Member == "" {
		return nil, c.emptyWait(r.NextDueMS, nowMS), nil
	}
	return c.claimed(tenant, r), 0, nil
}

// claimed builds the claimed job of one leased member of tenant's queue
// from its claim (or take) reply: a poison envelope, or one of another
// tenant, gets DecodeErr and an envelope of the member's id and cost 1.
func (c *Consumer) claimed(tenant string, r claimReply) *queue.Claimed {
	job := queue.NewClaimed(r.Member)
	job.Raw, job.Cancelled = []byte(r.Envelope), r.Cancelled
	job.BeatAt, job.Now = msTime(r.BeatMS), msTime(r.NowMS)
	env, derr := queue.Decode(job.Raw)
	if derr == nil && env.Tenant != tenant {
		derr = fmt.Errorf("queue: job %s of tenant %q found in the queue of %q", env.ID, env.Tenant, tenant)
	}
	if derr != nil {
		job.DecodeErr = derr
		env = queue.Envelope{Version: queue.EnvelopeVersion, ID: strings.SplitN(r.Member, "|", 2)[0], Tenant: tenant, Cost: 1}
	}
	env.Cost = queue.ClaimCost(env.Cost)
	job.Envelope = env
	job.Duplicate = derr == nil && queue.SameJob(env, r.DoneMS)
	return job
}

// msTime is unix ms as a time; 0 (none) is the zero time.
func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// emptyWait is how long Claim tells the caller to wait on an empty queue:
// until the next retry falls due (nextDueMS, -1 when none), at most Poll.
func (c *Consumer) emptyWait(nextDueMS, nowMS int64) time.Duration {
	wait := c.cfg.Poll
	if nextDueMS >= 0 {
		now := nowMS
		if now == 0 {
			now = c.clock.Now().UnixMilli()
		}
		if d := time.Duration(nextDueMS-now) * time.Millisecond; d < wait {
			wait = max(d, 0)
		}
	}
	return wait
}

// Extend pushes the deadline of the leases of jobs (all of tenant) to now +
// Lease (lua/lease_extend.lua on keys.Processing) and returns the jobs
// whose lease was already lost.
func (c *Consumer) Extend(ctx context.Context, tenant string, jobs []*queue.Claimed) ([]*queue.Claimed, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	a := extendArgs{Tenant: tenant, Lease: c.cfg.Lease, Members: make([]string, len(jobs))}
	byMember := make(map[string]*queue.Claimed, len(jobs))
	for i, j := range jobs {
		a.Members[i] = j.Token()
		byMember[j.Token()] = j
	}
	v, err := a.Call().Run(ctx, c.rdb).Result()
	if err != nil {
		return nil, queue.Unavailable(fmt.Sprintf("extend %d leases of %s", len(jobs), tenant), err)
	}
	lost, err := parseExtend(v)
	if err != nil {
		return nil, fmt.Errorf("queue: extend %d leases of %s: %w", len(jobs), tenant, err)
	}
	out := make([]*queue.Claimed, 0, len(lost))
	for _, m := range lost {
		if j, ok := byMember[m]; ok {
			out = append(out, j)
		}
	}
	return out, nil
}
