-- job_state_settle.lua: record how a delivery or a drop ended (Kafka queue
-- backend; the Redis backend does this inside ack.lua and lease_defer.lua).
--
-- The delivery leaves the tenant's deliveries in progress; a dead job raises
-- the tenant's DLQ counter; the job's state becomes ARGV[2] through
-- record_final of job_state_final.lua (lua.Include puts it first), the
-- write ack.lua makes on the Redis backend. The hash is created when
-- missing: on Kafka a job may finish before the producer's post-ack write
-- records it, which then keeps this state (job_state_enqueue.lua).
--
-- KEYS[1]  the job's state hash (keys.JobState)
-- KEYS[2]  the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[3]  the tenant's deliveries in progress (keys.Delivering)
-- KEYS[4]  the tenant's dead-job counter (keys.DLQCount)
-- ARGV[1]  the delivery's member in KEYS[3] (queue.Claimed.Token)
-- ARGV[2]  the state: done, dead, cancelled, expired or retrying
-- ARGV[3]  the last delivery error, "" to keep the recorded one
-- ARGV[4]  why a dead job is dead, or ""
-- ARGV[5]  PEXPIRE of the state and sequence, ms (keys.JobStateTTL)
-- ARGV[6]  1 to add one to KEYS[4] (the job went to the dead-letter topic), else 0
-- ARGV[7]  PEXPIRE of KEYS[4], ms (keys.QueueTTL)
-- ARGV[8]  retrying: the retry's due time, unix ms, the score of the job in
--          the retrying index (keys.JobIndex); "" or 0 for Redis TIME
--
-- Returns 1.

redis.call('ZREM', KEYS[3], ARGV[1])
if ARGV[6] == '1' then
  redis.call('INCR', KEYS[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[7])
end
local due = tonumber(ARGV[8])
if due ~= nil and due <= 0 then due = nil end
record_final(KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4], ARGV[5], due)
return 1
