package lua

import (
	"fmt"

	"github.com/sluicehq/sluice/keys"
)

// preludes are the Lua sources generated from Go constants that concat puts
// right before an embedded module, so a bound is written once, in Go, and
// the scripts read the same value.
var preludes = map[string]func() string{
	"job_state_final.lua": jobIndexBounds,
}

// jobIndexBounds defines the job index's bounds (package keys) as Lua
// locals for job_state_final.lua: JOB_INDEX_TTL (keys.JobStateTTL, ms),
// DONE_RETENTION_MS (keys.DoneRetention), DONE_MAX (keys.DoneMax),
// DONE_TRIM_EVERY (keys.DoneTrimEvery) and DEAD_STATE_TTL (keys.DeadTTL, ms: a dead job's state lives as long as its
// dead letter).
func jobIndexBounds() string {
	return fmt.Sprintf("-- job_index_bounds (generated from package keys):\nlocal JOB_INDEX_TTL = %d\nlocal DONE_RETENTION_MS = %d\nlocal DONE_MAX = %d\nlocal DONE_TRIM_EVERY = %d\nlocal DEAD_STATE_TTL = %d\n",
		keys.JobStateTTL.Milliseconds(), keys.DoneRetention.Milliseconds(), keys.DoneMax, keys.DoneTrimEvery, keys.DeadTTL.Milliseconds())
}
