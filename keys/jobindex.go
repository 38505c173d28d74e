package keys

// The listed job states: GET /v1/jobs?state= takes one of these, and each
// has a per-tenant index, JobIndex. (cancelled and expired jobs are not
// listed: they keep only their job-state hash, keys.JobState.)
var ListedStates = []string{"queued", "scheduled", "in_flight", "retrying", "dead", "done"}

// JobIndex is the tenant's sorted set of the ids of its jobs in state
// (one of ListedStates): member = job id. The score is per state:
//
//	queued     the job's enqueue sequence number (keys.JobSeq)
//	scheduled  the unix ms at which the job is due
//	in_flight  the unix ms at which the delivery started
//	retrying   the unix ms at which the retry is due
//	dead       the unix ms at which the job died (the dead-letter index)
//	done       the unix ms at which the delivery succeeded
//
// The scripts that write a job's state (package jobstate) move its id
// between these sets in the same call. The Lua scripts build the same key
// from the job-state key's hash tag. TTL: JobStateTTL, refreshed on every
// write (done and dead are also trimmed by age and count).
func JobIndex(tenant, state string) string { return tag(tenant) + ":jobs:" + state }
