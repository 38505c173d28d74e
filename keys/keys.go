// Package keys builds every Redis key sluice writes. Each key is built by one
// function here and nowhere else; every key carries the tenant's Redis Cluster
// hash tag ({tenant}), so all keys of a tenant live in one slot and any Lua
// script that touches several of them runs on one node without CROSSSLOT.
//
// Keys that hold state also need a TTL; the TTL each key gets is stated on its
// builder and is set by the script or command that writes it.
package keys

import "fmt"

// Prefix starts every key sluice writes.
const Prefix = "sluice:"

// idByte says which bytes an id may hold: [A-Za-z0-9._-] in a tenant id,
// and ':' too in other ids. A loop over it replaces the regexps
// ^[A-Za-z0-9._-]{1,64}$ and ^[A-Za-z0-9._:-]{1,128}$ (TestValidMatchesRegexp
// keeps them as the reference): the drainer checks the tenant of every job
// it takes, and a regexp match was 3 % of a Kafka drain's CPU.
var idByte = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
			t[c] = tenantOK | idOK
		case c == ':':
			t[c] = idOK
		}
	}
	return t
}()

const (
	tenantOK = 1 << iota
	idOK
)

// shaped reports whether s has 1 to max bytes, each allowed by class.
func shaped(s string, max int, class uint8) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if idByte[s[i]]&class == 0 {
			return false
		}
	}
	return true
}

// TenantRule states the tenant id rule of ValidTenant, for error messages.
const TenantRule = `1 to 64 characters of [A-Za-z0-9._-], not "." or "..", not starting with "_" (reserved for sluice's own labels)`

// ValidTenant reports whether id is a valid tenant id (TenantRule): 1 to 64
// characters of [A-Za-z0-9._-], except "." and ".." (an id is a URL path
// segment: /admin/v1/tenants/{id}) and ids starting with "_", which are
// reserved for sluice's own labels (the metrics' catch-all tenant "_other").
// It is the one tenant id rule: the configuration, the admin API, ingest and
// every key builder's caller use it.
func ValidTenant(id string) bool {
	return shaped(id, 64, tenantOK) && id != "." && id != ".." && id[0] != '_'
}

// IDRule states the rule of ValidID, for error messages.
const IDRule = `1 to 128 characters of [A-Za-z0-9._:-], not "." or ".."`

// ValidID reports whether id may be used inside a key and a URL path (a job
// type, a client job id, a policy name): IDRule, 1 to 128 characters of
// [A-Za-z0-9._:-] except "." and ".." (a job id is a path segment,
// /v1/jobs/{id}).
func ValidID(id string) bool { return shaped(id, 128, idOK) && id != "." && id != ".." }

func tag(tenant string) string { return Prefix + "{" + tenant + "}" }

// Admission is the state key of one admission policy of a tenant, for example
// Admission("acme", "gcra", "tenant"). TTL: set by the algorithm's script
// (window length, or the time until the state would be back to empty).
func Admission(tenant, algorithm, policy string) string {
	return fmt.Sprintf("%s:adm:%s:%s", tag(tenant), algorithm, policy)
}

// Backlog is the tenant's count of queued, not yet finished jobs (in cost
// units). TTL: BacklogTTL, refreshed on every enqueue; a finish refreshes
// it when it creates or resets the counter and otherwise once a second per
// process (Refresh), so it is never below BacklogTTL minus a second while
// jobs finish.
func Backlog(tenant string) string { return tag(tenant) + ":backlog" }

// BacklogOwed is what finishes of the tenant's jobs could not take from its
// backlog counter (Kafka backend: a drainer finished a job before the
// producer's post-ack write counted it), paid out of the next raise
// (lua/backlog_raise.lua). TTL: BacklogOwedTTL, refreshed on every debt, so
// a debt the raise never pays (the counter was lost) stops holding the
// counter low within it.
func BacklogOwed(tenant string) string { return tag(tenant) + ":backlog_owed" }

// Queue is the tenant's Redis list of job envelopes (Redis queue backend).
// TTL: QueueTTL, refreshed on every push.
func Queue(tenant string) string { return tag(tenant) + ":queue" }

// Processing is the tenant's sorted set of leased jobs, scored by lease
// deadline in unix milliseconds (Redis queue backend). TTL: QueueTTL.
func Processing(tenant string) string { return tag(tenant) + ":processing" }

// Leased is the tenant's hash from job id to the leased envelope, so a reaper
// can return an expired lease to the queue. TTL: QueueTTL.
func Leased(tenant string) string { return tag(tenant) + ":leased" }

// Idempotency remembers the answer given to a client job id for 24 hours.
// TTL: IdempotencyTTL.
func Idempotency(tenant, clientID string) string { return tag(tenant) + ":idem:" + clientID }

// Water is the tenant's shared leaky-bucket water level, a Hash {water, ts}.
// TTL: the time the bucket takes to empty, plus a margin.
func Water(tenant string) string { return tag(tenant) + ":water" }

// Inflight is the tenant's concurrency semaphore: a sorted set of job ids
// scored by lease deadline. TTL: the longest lease, refreshed on acquire.
func Inflight(tenant string) string { return tag(tenant) + ":inflight" }

// Override holds the tenant's runtime configuration overrides (admin API).
// TTL: OverrideTTL, refreshed on every write.
func Override(tenant string) string { return tag(tenant) + ":override" }

// JobState holds a job's state for the visibility and cancel APIs.
// TTL: JobStateTTL.
func JobState(tenant, jobID string) string { return tag(tenant) + ":job:" + jobID }

// JobSeq is the tenant's enqueue sequence counter: the sequence number of
// its last enqueued job (each job-state hash records its own, field seq).
// TTL: JobStateTTL, refreshed on every write.
func JobSeq(tenant string) string { return tag(tenant) + ":jobs:seq" }

// JobsDispatched is the highest sequence number (keys.JobSeq) among the
// tenant's jobs that have left the head of its queue (dispatched or
// dropped); a queued job's position is its seq minus this minus one.
// TTL: JobStateTTL, refreshed on every write.
func JobsDispatched(tenant string) string { return tag(tenant) + ":jobs:dispatched" }

// Delivering is the tenant's sorted set of deliveries in progress, across
// all drainers: member = the claim's token (queue.Claimed.Token), score =
// the delivery's deadline in unix ms, pushed on with the lease. Its members
// with a score in the future are the tenant's jobs in flight.
// TTL: QueueTTL, refreshed on every write.
func Delivering(tenant string) string { return tag(tenant) + ":delivering" }

// Outflow is the tenant's hash of dispatched units per second, across all
// drainers: field = unix second (the drainer's clock), value = units, each
// drainer adding its counts once a second (lua/outflow_add.lua), so a
// second is complete at most a second after it ends. Fields older than
// OutflowTTL are trimmed by the writer. TTL: OutflowTTL, refreshed on every
// write.
func Outflow(tenant string) string { return tag(tenant) + ":outflow" }

// DLQCount counted the tenant's dead jobs written to the Kafka dead-letter
// topic. Retired: nothing writes it; the dead-letter count is the size of
// JobIndex(tenant, "dead") on both backends (docs/adr/0014-dead-letters.md).
func DLQCount(tenant string) string { return tag(tenant) + ":dlq:count" }

// Tenants is the set of tenants with runtime state. It is not tenant-scoped,
// so it is never used in a script together with a tenant key.
// TTL: OverrideTTL, refreshed on every write.
func Tenants() string { return Prefix + "tenants" }

// Delayed is the tenant's sorted set of jobs waiting for a retry, scored by
// the unix millisecond at which each goes back to the head of keys.Queue;
// members are envelope JSON (Redis queue backend). TTL: QueueTTL.
func Delayed(tenant string) string { return tag(tenant) + ":delayed" }

// DLQ was the tenant's dead-letter list (Redis queue backend). Retired:
// dead letters are DeadRecords with their index JobIndex(tenant, "dead");
// a list left by an older version is not migrated and expires with its
// TTL (QueueTTL) (docs/adr/0014-dead-letters.md).
func DLQ(tenant string) string { return tag(tenant) + ":dlq" }

// Audit is the tenant's capped list of admin changes, newest first: one JSON
// entry per change and tenant version (who, when, action, version and the
// fields changed, see tenants.AuditEntry), at most AuditMaxEntries and
// AuditMaxBytes. TTL: OverrideTTL, refreshed on every write.
func Audit(tenant string) string { return tag(tenant) + ":audit" }

// TenantsVersion is the global counter of runtime tenant changes, raised
// after every admin write; every registry polls it to catch a missed
// TenantsChannel message. Not tenant-scoped, like Tenants.
// TTL: OverrideTTL, refreshed on every write.
func TenantsVersion() string { return Prefix + "tenants:version" }

// TenantsChannel is the Pub/Sub channel (not a key) on which every admin
// write is announced to the registries of all ingest and drainer instances.
func TenantsChannel() string { return Prefix + "tenants:changes" }
