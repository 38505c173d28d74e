-- job_state_settle.lua: record how a delivery or a drop ended (Kafka queue
-- backend; the Redis backend does this inside ack.lua and lease_defer.lua).
-- Runs with job_state_lib.lua prepended (jobstate.Script).
--
-- The delivery leaves the tenant's deliveries in progress, the job's state
-- becomes ARGV[2] (with its last error and reason when given), the tenant's
-- dispatched sequence passes the job (a job dropped at the head of its lane
-- leaves the queue too), and a dead job raises the tenant's DLQ counter.
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
-- ARGV[8]  now, unix ms; "0" reads Redis TIME
--
-- Returns 1.

js.settle(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], '', ARGV[3], ARGV[4], js.now_ms(ARGV[8]), ARGV[5])
if ARGV[6] == '1' then
  redis.call('INCR', KEYS[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[7])
end
return 1
