package jobstate

import (
	"sort"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// OutflowAdd is one drainer's flush of a tenant's dispatched units per wall
// second (lua/outflow_add.lua): Units[s] units started in unix second s are
// added to keys.Outflow, whose fields older than keys.OutflowTTL are
// trimmed and whose TTL is refreshed; deliveries in keys.Delivering whose
// deadline passed (a drainer that died) are dropped. The drainer counts
// its starts in memory and flushes once a second, so the outflow of a
// second is complete at most a second after it ends.
type OutflowAdd struct {
	Tenant string
	Units  map[int64]int64
	// Now is the instant, for tests; zero reads Redis TIME.
	Now time.Time
}

// Call is the call of outflow_add.lua that records a; OutflowAddReply
// reads its reply.
func (a OutflowAdd) Call() lua.Call {
	var now int64
	if !a.Now.IsZero() {
		now = a.Now.UnixMilli()
	}
	secs := make([]int64, 0, len(a.Units))
	for s, n := range a.Units {
		if n != 0 { // a negative n takes back units counted for a job given back unsent
			secs = append(secs, s)
		}
	}
	sort.Slice(secs, func(i, j int) bool { return secs[i] < secs[j] })
	args := make([]any, 0, 2+2*len(secs))
	args = append(args, keys.OutflowTTL.Milliseconds(), now)
	for _, s := range secs {
		args = append(args, s, a.Units[s])
	}
	return lua.Call{Script: lua.OutflowAdd, Keys: []string{keys.Outflow(a.Tenant), keys.Delivering(a.Tenant)}, Args: args}
}

// OutflowAddReply reads outflow_add.lua's reply: the number of seconds
// added, >= 0. Any other reply is an error wrapping lua.ErrReply.
func OutflowAddReply(v any) (int64, error) {
	s := lua.OutflowAdd
	n, err := s.Int(v, "the reply")
	if err == nil && n < 0 {
		err = s.ReplyError("%d, want >= 0", n)
	}
	return n, err
}
