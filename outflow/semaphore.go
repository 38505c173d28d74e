package outflow

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// Semaphore is every tenant's concurrency cap, shared by all drainers: a
// sorted set per tenant (keys.Inflight) whose members are the slots taken,
// each scored by its lease deadline (lua/semaphore_acquire.lua). A slot is
// one place in it, held by one job's lease member; a dead drainer's slots
// expire with their lease, and a live one keeps them with Extend. The clock
// is Redis TIME. Semaphore is safe for concurrent use.
type Semaphore struct {
	rdb redis.Scripter
}

// NewSemaphore returns the semaphore on rdb.
func NewSemaphore(rdb redis.Scripter) *Semaphore { return &Semaphore{rdb: rdb} }

// Acquire takes one of the tenant's limit slots for member, held until now +
// lease. It reports whether member holds a slot (also when it held one
// already) and, when all are taken, how long until the earliest expires (at
// least 1 ms).
func (s *Semaphore) Acquire(ctx context.Context, tenant string, limit int, member string, lease time.Duration) (held bool, wait time.Duration, err error) {
	v, err := acquireCall(tenant, limit, member, lease, 0).Run(ctx, s.rdb).Result()
	if err == nil {
		if held, wait, err = parseAcquire(v); err == nil {
			return held, wait, nil
		}
	}
	return false, 0, fmt.Errorf("outflow: acquire a slot of %s: %w", tenant, err)
}

// Release gives member's slot back; a slot already expired is no error.
func (s *Semaphore) Release(ctx context.Context, tenant, member string) error {
	v, err := releaseCall(tenant, member).Run(ctx, s.rdb).Result()
	if err == nil {
		err = parseRelease(v)
	}
	if err != nil {
		return fmt.Errorf("outflow: release a slot of %s: %w", tenant, err)
	}
	return nil
}

// Extend pushes the deadline of members' slots to now + lease (Redis TIME);
// slots that expired meanwhile are not taken again.
func (s *Semaphore) Extend(ctx context.Context, tenant string, lease time.Duration, members []string) error {
	v, err := Extend{Key: keys.Inflight(tenant), Lease: lease, Members: members}.Call().Run(ctx, s.rdb).Result()
	if err == nil {
		_, err = ParseExtend(v)
	}
	if err != nil {
		return fmt.Errorf("outflow: extend slots of %s: %w", tenant, err)
	}
	return nil
}

// acquireCall is semaphore_acquire.lua's call: KEYS the inflight set, ARGV
// cap, member, lease (ms), now (ms, 0: Redis TIME).
func acquireCall(tenant string, limit int, member string, lease time.Duration, nowMS int64) lua.Call {
	return lua.Call{
		Script: lua.SemaphoreAcquire,
		Keys:   []string{keys.Inflight(tenant)},
		Args:   []any{limit, member, lease.Milliseconds(), nowMS},
	}
}

// parseAcquire reads semaphore_acquire.lua's reply: {1, 0} (held) or
// {0, wait_ms >= 1}.
func parseAcquire(v any) (held bool, wait time.Duration, err error) {
	s := lua.SemaphoreAcquire
	res, err := s.Ints(v, 2)
	if err != nil {
		return false, 0, err
	}
	switch {
	case res[0] == 1 && res[1] == 0:
		return true, 0, nil
	case res[0] == 0 && res[1] >= 1 && res[1] <= int64(time.Duration(1<<62)/time.Millisecond):
		return false, time.Duration(res[1]) * time.Millisecond, nil
	}
	return false, 0, s.ReplyError("%v, want {1, 0} or {0, wait_ms >= 1}", res)
}

// releaseCall is semaphore_release.lua's call: KEYS the inflight set, ARGV
// member.
func releaseCall(tenant, member string) lua.Call {
	return lua.Call{Script: lua.SemaphoreRelease, Keys: []string{keys.Inflight(tenant)}, Args: []any{member}}
}

// parseRelease reads semaphore_release.lua's reply: 1 (the slot was held)
// or 0 (it had expired).
func parseRelease(v any) error {
	s := lua.SemaphoreRelease
	n, err := s.Int(v, "the reply")
	if err == nil && n != 0 && n != 1 {
		err = s.ReplyError("%d, want 0 or 1", n)
	}
	return err
}
