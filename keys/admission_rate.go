package keys

import "time"

// AdmissionRate is the tenant's hash of admission decisions per second,
// across all ingest instances: fields "<unix second>:admitted" and
// "<unix second>:refused" (the Redis TIME second of the write), value =
// jobs. Each ingest counts its decisions in memory and adds them once a
// second (lua/admission_rate_add.lua); fields older than AdmissionRateTTL
// are trimmed by the writer. TTL: AdmissionRateTTL, refreshed on every
// write.
func AdmissionRate(tenant string) string { return tag(tenant) + ":admission_rate" }

// AdmissionRateTTL bounds the per-second admission counters
// (AdmissionRate): the stats read the last 10 complete seconds.
const AdmissionRateTTL = 30 * time.Second
