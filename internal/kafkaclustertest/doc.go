// Package kafkaclustertest holds the end-to-end test of the Kafka backend on
// a replicated cluster (issue 10, requirement 3): a private 3-node KRaft
// cluster (testenv.StartKafkaCluster), the jobs and DLQ topics created by
// sluice with the automatic replication factor (3) and min.insync.replicas
// (2), an in-process ingest, two drainers and a counting sink. Under HTTP
// load with a ledger of every answer it SIGKILLs the leader of the
// partition in use, then the active controller, then two of the three
// nodes, and checks that no 202'd job is lost, that ingest answers 503 +
// Retry-After (never 202) while a write cannot reach min ISR, and how soon
// 202s come back. It runs in make test (≈70-90 s).
package kafkaclustertest
