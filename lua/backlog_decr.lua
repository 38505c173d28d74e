-- backlog_decr.lua: lower a tenant's backlog counter when a job is finished
-- (Kafka queue backend; its finish runs the same rule inside
-- kafka_finish.lua). backlog_lower of backlog_lower.lua, which lua.Include
-- puts first, holds the rule: DECRBY the cost, never below 0, the TTL
-- refreshed on ARGV[3] "1" or when the counter was created or reset, a
-- purged job (reason "purged" in KEYS[2]) not counted again, and what the
-- counter could not give owed in KEYS[3] when given.
--
-- KEYS[1]  backlog counter (keys.Backlog)
-- KEYS[2]  optional: the job's state hash (keys.JobState); "" for none
-- KEYS[3]  optional: the tenant's owed count (keys.BacklogOwed)
-- ARGV[1]  job cost, integer >= 1
-- ARGV[2]  PEXPIRE of the counter, ms (keys.BacklogTTL)
-- ARGV[3]  "1": refresh the TTL (keys.Refresh); "0" or absent: only as above
-- ARGV[4]  with KEYS[3]: PEXPIRE of the owed count, ms (keys.BacklogOwedTTL)
--
-- Returns the counter after the decrement (>= 0), or as it is for a
-- purged job.

return backlog_lower(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], KEYS[3], ARGV[4])
