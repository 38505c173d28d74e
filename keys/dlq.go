package keys

import "time"

// DeadRecords is the tenant's hash of dead letters: field = job id, value =
// the queue.DeadLetter JSON (with the stored envelope in its job field, see
// package dlq). Its index, newest first by the time each job died, is
// JobIndex(tenant, "dead"); the scripts that write one write the other in
// the same call, and trim both to DeadMaxJobs and DeadTTL.
// TTL: DeadTTL, refreshed on every write.
func DeadRecords(tenant string) string { return tag(tenant) + ":dead:records" }

// Retention of a tenant's dead letters (DeadRecords and its index): each
// write of a dead letter removes the oldest beyond DeadMaxJobs and those
// that died more than DeadTTL before it, in the same script, and refreshes
// both keys' TTL to DeadTTL.
const (
	// DeadMaxJobs is the most dead letters kept per tenant.
	DeadMaxJobs = 10000
	// DeadTTL is how long a dead letter is kept: at least until it is this
	// old, and at most this long after the tenant's newest one.
	DeadTTL = 14 * 24 * time.Hour
)

// DeadRedriving is the tenant's hash of dead letters a redrive is putting
// back on the queue: field = job id, value = "<token>:<unix ms the claim
// ends>" (package dlq, lua/dlq_claim.lua). A redrive claims a letter before
// it enqueues the job and releases it after the letter's removal, so two
// redrives at once never both enqueue one letter; a claim a crashed
// redrive left ends after RedriveClaimTTL.
// TTL: RedriveClaimTTL, refreshed on every claim.
func DeadRedriving(tenant string) string { return tag(tenant) + ":dead:redriving" }

// RedriveClaimTTL bounds a redrive's claim on a dead letter: well above
// the longest enqueue of a chunk (an admin request's bound).
const RedriveClaimTTL = 5 * time.Minute
