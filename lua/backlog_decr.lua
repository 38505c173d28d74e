-- backlog_decr.lua: lower a tenant's backlog counter when a job is finished
-- (Kafka queue backend; the Redis backend does this inside ack.lua).
--
-- DECRBY the cost, never below 0 (a missing or expired counter, or one that
-- was lowered already for a job delivered twice, stays at 0). The TTL is
-- refreshed when ARGV[3] is "1" (the caller's first finish of the tenant in
-- a wall second, keys.Refresh) and whenever this call created the counter
-- or set it to 0 (SET clears a TTL), so the counter never lives without
-- one and an existing one's TTL stays within a second of BacklogTTL while
-- jobs finish. A job that was purged
-- (POST /admin/v1/tenants/{id}/queue:purge: its state hash KEYS[2] has
-- reason "purged") is not counted again: the purge set the counter to 0
-- without it, so lowering it now would undercount the jobs queued since.
--
-- KEYS[1]  backlog counter (keys.Backlog)
-- KEYS[2]  optional: the job's state hash (keys.JobState)
-- ARGV[1]  job cost, integer >= 1
-- ARGV[2]  PEXPIRE of the counter, ms (keys.BacklogTTL)
-- ARGV[3]  "1": refresh the TTL (keys.Refresh); "0" or absent: only as above
--
-- Returns the counter after the decrement (>= 0), or as it is for a
-- purged job.

if KEYS[2] then
  -- pcall: HGET fails (WRONGTYPE) only on the older string marker.
  if redis.pcall('HGET', KEYS[2], 'reason') == 'purged' then
    return tonumber(redis.call('GET', KEYS[1])) or 0
  end
end
-- A counter DECRBY creates is below 0, and the SET clears a TTL: both
-- refresh it; an existing counter keeps its TTL but once a second.
local left = redis.call('DECRBY', KEYS[1], ARGV[1])
if left < 0 or ARGV[3] == '1' then
  if left < 0 then
    redis.call('SET', KEYS[1], 0)
    left = 0
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return left
