package keys

import "time"

// Bounds of the done index (JobIndex(tenant, "done")): each job that
// finishes done trims the tenant's index in the same script
// (lua/job_state_final.lua, which gets these values generated into its
// source by package lua), so GET /v1/jobs?state=done lists at most the
// DoneMax most recent deliveries of the last DoneRetention. The job-state
// hash itself stays for JobStateTTL: GET /v1/jobs/{id} still finds an older
// job.
const (
	// DoneRetention is how long a done job stays listed.
	DoneRetention = time.Hour
	// DoneMax is the most done jobs listed per tenant.
	DoneMax = 10000
)
