package keys

import "time"

// Bounds of the done index (JobIndex(tenant, "done")): a job that finishes
// done trims the tenant's index in the same script (lua/job_state_final.lua,
// which gets these values generated into its source by package lua) when
// its seq is a multiple of DoneTrimEvery (or it has none), or when it is the
// finishing process's first finish of the tenant in a wall second
// (Refresh). So GET /v1/jobs?state=done lists the DoneMax most recent
// deliveries of the last DoneRetention, plus at most the done jobs finished
// since the last trim: fewer than DoneTrimEvery when jobs finish in seq
// order, never more than one second's finishes; and an entry stays listed at
// most a second past DoneRetention (of the newest finish). The job-state
// hash itself stays for JobStateTTL: GET /v1/jobs/{id} still finds an older
// job.
const (
	// DoneRetention is how long a done job stays listed.
	DoneRetention = time.Hour
	// DoneMax is the most done jobs listed per tenant.
	DoneMax = 10000
	// DoneTrimEvery is how many seqs apart the finishes that trim the done
	// index are (besides one finish a second per process).
	DoneTrimEvery = 64
)
