package keys

import "time"

// TTLs of the keys that are not algorithm state.
const (
	// BacklogTTL bounds how long a backlog counter survives without writes.
	BacklogTTL = 7 * 24 * time.Hour
	// BacklogOwedTTL bounds how long a finish's debt to the backlog
	// counter (BacklogOwed) waits for the post-ack write it came before:
	// that write follows the ack within backlogTimeout, or within a retry
	// or two of Redis' return.
	BacklogOwedTTL = time.Minute
	// WaterMargin is added to the PX TTL of a tenant's water-level hash
	// (Water) beyond the time the bucket takes to empty (or the adaptive
	// rate to recover), so an idle tenant's state (and its adaptive rate)
	// outlives short pauses and still disappears when the tenant stops.
	WaterMargin = 60 * time.Second
	// QueueTTL bounds how long an untouched tenant queue survives.
	QueueTTL = 7 * 24 * time.Hour
	// IdempotencyTTL is how long a client job id is remembered.
	IdempotencyTTL = 24 * time.Hour
	// OverrideTTL bounds how long runtime overrides survive without writes.
	OverrideTTL = 365 * 24 * time.Hour
	// JobStateTTL is how long a job's state stays visible.
	JobStateTTL = 7 * 24 * time.Hour
	// OutflowTTL bounds the per-second outflow counters (keys.Outflow):
	// the measured rate reads the last 10 complete seconds.
	OutflowTTL = 30 * time.Second
)

// Caps of a tenant's audit list (keys.Audit): each write keeps the newest
// entries within both, trimming the older ones in the same script. An entry
// is at most tenants.AuditEntryMaxBytes, so the byte cap binds from about
// AuditMaxBytes / 4 KiB = 256 entries of large changes.
const (
	// AuditMaxEntries is the most entries kept.
	AuditMaxEntries = 1000
	// AuditMaxBytes is the most bytes of entries kept (1 MiB).
	AuditMaxBytes = 1 << 20
)
