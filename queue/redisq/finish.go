package redisq

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/lua"
)

// newFinishGroup returns the Batcher of Finish: concurrent finishes share
// round trips, and those of one tenant that leave together are one ack.lua
// call (ackCall), so the tenant's lease set, leased hash, backlog counter
// and job indexes take one command each for all of them. A call that fails
// fails each of its finishes, whose leases then expire and whose jobs come
// again (at least once).
func newFinishGroup(rdb redis.UniversalClient, maxFlushes int, timeout time.Duration) *lua.Batcher[ackArgs, bool] {
	return lua.NewBatcher(rdb, maxFlushes, timeout, lua.BatchSpec[ackArgs, bool]{
		Key: func(a ackArgs) string { return a.Tenant },
		ID:  func(a ackArgs) string { return a.JobID },
		Max: maxAckJobs,
		// ack.lua refuses costs summing past limits.MaxCost (its Lua
		// doubles): a call's jobs stay within it.
		Weight:    func(a ackArgs) int64 { return a.Cost },
		MaxWeight: limits.MaxCost,
		Call:      ackCall,
		Parse:     parseAck,
	})
}
