-- kafka_finish.lua: a Kafka consumer's Finish of one job in one call: lower
-- the tenant's backlog and record how the delivery or the drop ended
-- (Kafka queue backend; docs/perf.md 2.3, lever L2). lua.Include puts
-- job_state_final.lua, dead_letter.lua, job_settle.lua and backlog_lower.lua
-- first; this is backlog_decr.lua then job_state_settle.lua, in that order,
-- as one script.
--
-- First backlog_lower: the counter KEYS[6] falls by the job's cost, never
-- below 0 (the rest owed in KEYS[7], paid by backlog_raise.lua), unless
-- the job was purged (reason "purged" in its state hash, read before the
-- state is written); its TTL refreshed on ARGV[12] "1" or
-- when the counter was created or reset. Then, unless ARGV[2] is "" (a
-- duplicate: a copy of a job delivered already, whose state stays done and
-- which only lowers the backlog), settle_delivery: the delivery leaves the
-- deliveries in progress, a dead job's letter joins the dead index and
-- letters, and the state becomes ARGV[2] (record_final; the done index is
-- trimmed on ARGV[12] "1" too).
--
-- KEYS[1..5]   job_state_settle.lua's: the job's state hash, the dispatched
--              sequence, the deliveries in progress, the dead index, the
--              dead letters
-- KEYS[6]      the tenant's backlog counter (keys.Backlog)
-- KEYS[7]      the tenant's owed count (keys.BacklogOwed)
-- ARGV[1..12]  job_state_settle.lua's, ARGV[2] "" for a duplicate (nothing
--              recorded) and ARGV[12] also backlog_decr.lua's refresh flag
-- ARGV[13]     job cost, integer >= 1
-- ARGV[14]     PEXPIRE of the backlog counter, ms (keys.BacklogTTL)
-- ARGV[15]     PEXPIRE of the owed count, ms (keys.BacklogOwedTTL)
--
-- Returns the backlog counter after the decrement (>= 0), or as it is for
-- a purged job.

local left = backlog_lower(KEYS[6], KEYS[1], ARGV[13], ARGV[14], ARGV[12], KEYS[7], ARGV[15])
if ARGV[2] ~= '' then
  settle_delivery(KEYS, ARGV)
end
return left
