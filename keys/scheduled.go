package keys

// Scheduled jobs (submitted with "not_before" or "delay"; package
// internal/scheduler). Until it is due a scheduled job is not on the queue
// backend: its envelope waits in ScheduledJobs, its id in
// JobIndex(tenant, "scheduled") scored by its due time, and its state hash
// (JobState) says "scheduled". A drainer's scheduler moves it to the queue
// when due, through the backend's Producer, like a new job.

// ScheduledJobs is the tenant's hash of scheduled jobs: job id → envelope
// (queue.Envelope JSON). While a scheduler moves a job the value may be the
// literal "cancelled" (the job was cancelled during the move). TTL: the
// latest due time + JobStateTTL, extended by each schedule (never shortened).
func ScheduledJobs(tenant string) string { return tag(tenant) + ":sched:jobs" }

// ScheduledMoving is the tenant's sorted set of the scheduled jobs a
// scheduler is moving to the queue: member = job id, score = the move's
// lease deadline (unix ms). A job whose lease passed (its mover died) is
// taken again by the next scheduler. TTL: JobStateTTL, set when a job is
// taken.
func ScheduledMoving(tenant string) string { return tag(tenant) + ":sched:moving" }

// ScheduledTenants is the global hint of which tenants have scheduled jobs:
// member = tenant, score = the earliest due time (or move lease deadline)
// of its jobs, unix ms, lowered by every schedule (ZADD LT) and set by the
// scheduler after each move. It is not tenant-scoped (no hash tag, so it
// has a slot of its own on a cluster and is written in a separate call); a
// lost hint is found again by the scheduler's sweep of the configured
// tenants. TTL: none (one member per tenant with scheduled jobs).
func ScheduledTenants() string { return Prefix + "sched:tenants" }
