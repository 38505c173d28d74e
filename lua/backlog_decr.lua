-- backlog_decr.lua: lower a tenant's backlog counter when a job is finished
-- (Kafka queue backend; the Redis backend does this inside ack.lua).
--
-- DECRBY the cost, never below 0 (a missing or expired counter, or one that
-- was lowered already for a job delivered twice, stays at 0), and refresh
-- the TTL, so the counter never lives without one.
--
-- KEYS[1]  backlog counter (keys.Backlog)
-- ARGV[1]  job cost, integer >= 1
-- ARGV[2]  PEXPIRE of the counter, ms (keys.BacklogTTL)
--
-- Returns the counter after the decrement (>= 0).

local left = redis.call('DECRBY', KEYS[1], ARGV[1])
if left < 0 then
  redis.call('SET', KEYS[1], 0)
  left = 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return left
