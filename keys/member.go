package keys

import "time"

// KafkaMember records which consumer-group member id a drainer instance
// holds in group (Kafka queue backend): "token unix_ms member_id", refreshed
// every MemberRefresh by the live process. A restarted instance that finds
// its predecessor's record gone stale removes that member from the group
// (queue/kafkaq member.go). Not tenant-scoped, like Tenants. TTL: MemberTTL,
// refreshed on every write.
func KafkaMember(group, instance string) string {
	return Prefix + "kafka:member:" + group + ":" + instance
}

// MemberTTL bounds how long a KafkaMember record outlives its last refresh.
const MemberTTL = time.Hour
