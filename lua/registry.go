package lua

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The registry: every script sluice runs, each registered once, here. The
// comment names its caller, where its Go twin (typed arguments and reply
// parser) lives. The admission scripts are Admit and AdmitFor (admit.go),
// admission with the Redis enqueue Submit and SubmitFor (submit.go).
var (
	// Queue, Redis backend (queue/redisq).
	Enqueue     = register(include("enqueue.lua", "num.lua", "job_state_final.lua", "enqueue_jobs.lua"))
	Claim       = register(include("claim.lua", "job_state_final.lua"))
	Take        = register(include("take.lua", "job_state_final.lua", "bucket_level.lua", "outflow_count.lua"))
	KafkaUntake = register(include("kafka_untake.lua", "job_state_final.lua"))
	Ack         = register(include("ack.lua", "job_state_final.lua", "dead_letter.lua"))
	Release     = register(include("release.lua", "job_state_final.lua"))
	LeaseDefer  = register(include("lease_defer.lua", "job_state_final.lua"))
	LeaseExtend = register(mustLoad("lease_extend.lua"))
	Reap        = register(mustLoad("reap.lua"))

	// Queue, Kafka backend (queue/kafkaq).
	BacklogDecr  = register(include("backlog_decr.lua", "backlog_lower.lua"))
	JobCancelled = register(mustLoad("job_cancelled.lua"))
	KafkaTake    = register(include("kafka_take.lua", "job_state_final.lua", "bucket_level.lua"))
	KafkaFinish  = register(include("kafka_finish.lua", "job_state_final.lua", "dead_letter.lua", "backlog_lower.lua"))

	// Client ids whose enqueue outcome was unknown (ingest).
	IdempotencyTake = register(mustLoad("idempotency_take.lua"))

	// Job state records (jobstate).
	JobStateEnqueue  = register(include("job_state_enqueue.lua", "job_state_final.lua", "backlog_raise.lua"))
	JobStateDispatch = register(include("job_state_dispatch.lua", "job_state_final.lua"))
	OutflowAdd       = register(include("outflow_add.lua", "outflow_count.lua"))
	JobStateSettle   = register(include("job_state_settle.lua", "job_state_final.lua", "dead_letter.lua", "job_settle.lua"))
	JobStateCancel   = register(include("job_state_cancel.lua", "job_state_final.lua"))
	JobList          = register(mustLoad("job_list.lua"))
	Purge            = register(include("purge.lua", "job_state_final.lua"))

	// Scheduled jobs (internal/scheduler: Add and Cancel for ingest, the
	// mover for the drainers) and heartbeat jobs (ingest).
	ScheduleAdd    = register(mustLoad("schedule_add.lua"))
	ScheduleTake   = register(mustLoad("schedule_take.lua"))
	ScheduleDone   = register(include("schedule_done.lua", "job_state_final.lua", "dead_letter.lua"))
	ScheduleCancel = register(mustLoad("schedule_cancel.lua"))
	ScheduleDue    = register(mustLoad("schedule_due.lua"))
	JobBeat        = register(mustLoad("job_beat.lua"))

	// Outflow: the shared bucket, the concurrency semaphore, the adaptive
	// rate (outflow), and a tenant's stats read (ingest).
	LeakyBucket      = register(include("leaky_bucket.lua", "bucket_level.lua"))
	SemaphoreAcquire = register(mustLoad("semaphore_acquire.lua"))
	SemaphoreRelease = register(mustLoad("semaphore_release.lua"))
	DrainAdapt       = register(mustLoad("drain_adapt.lua"))
	TenantStats      = register(mustLoad("tenant_stats.lua"))

	// Admission decisions per second, across ingest instances (ingest).
	AdmissionRateAdd  = register(mustLoad("admission_rate_add.lua"))
	AdmissionRateRead = register(mustLoad("admission_rate_read.lua"))
	// The backlog sampler and the console's history (internal/depth).
	HistorySample = register(mustLoad("history_sample.lua"))

	// Admission extras (limits) and runtime tenants (tenants).
	GCRARescale = register(mustLoad("gcra_rescale.lua"))
	TenantWrite = register(mustLoad("tenant_write.lua"))
	AuditPage   = register(mustLoad("audit_page.lua"))

	// A request's client-id keys, released or marked unknown (ingest).
	IdemWrite = register(mustLoad("idem_write.lua"))

	// Dead letters (dlq).
	DLQPage   = register(mustLoad("dlq_page.lua"))
	DLQRemove = register(mustLoad("dlq_remove.lua"))
	DLQClaim  = register(mustLoad("dlq_claim.lua"))
)

// Modules are the embedded files that are not scripts of their own: each
// only defines local functions for the scripts that include it.
var Modules = append([]string{"num.lua", "admit_prelude.lua", "admit.lua", "admit_decide.lua", "job_state_final.lua", "dead_letter.lua", "enqueue_jobs.lua", "bucket_level.lua", "backlog_lower.lua", "backlog_raise.lua", "job_settle.lua", "outflow_count.lua"}, AdmitModules...)

var (
	regMu    sync.Mutex
	regNames = map[string]bool{}
	regList  []*Script
)

// register adds s to the registry and returns it. A name registered twice
// is a programming error (any test catches the panic).
func register(s *Script) *Script {
	regMu.Lock()
	defer regMu.Unlock()
	if regNames[s.name] {
		panic(fmt.Sprintf("lua: script %q registered twice", s.name))
	}
	regNames[s.name] = true
	regList = append(regList, s)
	return s
}

// All returns every registered script: those above and the admission
// scripts (Admit, and AdmitFor of each AdmitModules entry) and Submit and
// SubmitFor of each, in
// registration order.
func All() []*Script {
	Admit()
	AdmitFor(AdmitModules[0])
	Submit()
	regMu.Lock()
	defer regMu.Unlock()
	return append([]*Script(nil), regList...)
}

// LoadAll loads every registered script (All) with SCRIPT LOAD, on every
// master of a cluster. Each service calls it once at start-up: a script
// Redis refuses, or a Redis that cannot be reached, returns an error naming
// the script, and the service does not start.
func LoadAll(ctx context.Context, rdb redis.UniversalClient) error {
	return Load(ctx, rdb, All()...)
}

// Load loads scripts, stopping at the first error.
func Load(ctx context.Context, rdb redis.UniversalClient, scripts ...*Script) error {
	for _, s := range scripts {
		if err := s.Load(ctx, rdb); err != nil {
			return err
		}
	}
	return nil
}
