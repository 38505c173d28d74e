-- job_state_settle.lua: record how a delivery or a drop ended (Kafka queue
-- backend; the Redis backend does this inside ack.lua and lease_defer.lua).
--
-- The delivery leaves the tenant's deliveries in progress; a dead job's
-- dead letter is written to the tenant's dead index and letters (dead_add
-- of dead_letter.lua; the consumer wrote it to the DLQ topic before); the
-- job's state becomes ARGV[2] through record_final of job_state_final.lua
-- (lua.Include puts both modules first), the
-- write ack.lua makes on the Redis backend. The hash is created when
-- missing: on Kafka a job may finish before the producer's post-ack write
-- records it, which then keeps this state (job_state_enqueue.lua).
--
-- KEYS[1]  the job's state hash (keys.JobState)
-- KEYS[2]  the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[3]  the tenant's deliveries in progress (keys.Delivering)
-- KEYS[4]  the tenant's dead index (keys.JobIndex(t, "dead"))
-- KEYS[5]  the tenant's dead letters (keys.DeadRecords)
-- ARGV[1]  the delivery's member in KEYS[3] (queue.Claimed.Token)
-- ARGV[2]  the state: done, dead, cancelled, expired or retrying
-- ARGV[3]  the last delivery error, "" to keep the recorded one
-- ARGV[4]  why a dead job is dead, or ""
-- ARGV[5]  PEXPIRE of the state and sequence, ms (keys.JobStateTTL)
-- ARGV[6]  the dead letter (JSON) of a dead job, else ""
-- ARGV[7]  PEXPIRE of KEYS[4] and KEYS[5], ms (keys.DeadTTL); also their age bound
-- ARGV[8]  with a dead letter: when the job died, unix ms (0: Redis TIME)
-- ARGV[9]  with a dead letter: most dead letters kept (keys.DeadMaxJobs)
-- ARGV[10] with a dead letter: the job id
-- ARGV[11] retrying: the retry's due time, unix ms, the score of the job in
--          the retrying index (keys.JobIndex); "" or 0 for Redis TIME
-- ARGV[12] "1" on the caller's first settle of the tenant in a wall second
--          (keys.Refresh): the done index is trimmed then too
--
-- Returns 1.

redis.call('ZREM', KEYS[3], ARGV[1])
if ARGV[6] ~= '' then
  dead_add(KEYS[4], KEYS[5], ARGV[10], ARGV[6], ARGV[8], ARGV[9], ARGV[7])
end
local due = tonumber(ARGV[11])
if due ~= nil and due <= 0 then due = nil end
record_final(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4], ARGV[5], due, ARGV[12])
return 1
