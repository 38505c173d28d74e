package outflow

import (
	"time"

	"github.com/sluicehq/sluice/lua"
)

// Extend is the Go twin of lua/lease_extend.lua on a sorted set of members
// scored by their deadline in unix ms: the concurrency slots (keys.Inflight,
// Semaphore.Extend) and the drainer's deliveries in progress
// (keys.Delivering). Members still in Key get the deadline now + Lease;
// members not there are left out, not added.
type Extend struct {
	// Key is the sorted set.
	Key string
	// Lease is the time from now to the new deadline.
	Lease time.Duration
	// Members are the members to extend.
	Members []string
	// Now is the instant of the call; zero reads Redis TIME.
	Now time.Time
}

// Call returns the script call: KEYS Key, ARGV now (ms, 0: Redis TIME),
// lease (ms), members.
func (e Extend) Call() lua.Call {
	var now int64
	if !e.Now.IsZero() {
		now = e.Now.UnixMilli()
	}
	args := make([]any, 0, 2+len(e.Members))
	args = append(args, now, e.Lease.Milliseconds())
	for _, m := range e.Members {
		args = append(args, m)
	}
	return lua.Call{Script: lua.LeaseExtend, Keys: []string{e.Key}, Args: args}
}

// ParseExtend reads lease_extend.lua's reply: the members that were not in
// the set (an array of strings, empty when all were).
func ParseExtend(v any) (lost []string, err error) {
	return lua.LeaseExtend.Strings(v)
}
