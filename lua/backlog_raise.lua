-- backlog_raise.lua: raise a tenant's backlog counter by the cost of the
-- jobs of one acknowledged produce request (Kafka queue backend: the
-- producer's post-ack write, queue/kafkaq backlog.write), less what
-- finishes owe it. Kafka hands a record out at its ack, so a drainer can
-- finish a job before this write: backlog_lower.lua then finds the counter
-- short (at 0) and records the shortfall in the owed count, which this
-- script pays first. Without it the counter would end high by the job's
-- cost, and max_backlog would refuse jobs it should admit.
--
-- KEYS[1]  the tenant's backlog counter (keys.Backlog)
-- KEYS[2]  the tenant's owed count (keys.BacklogOwed)
-- ARGV[1]  the jobs' cost, integer >= 1
-- ARGV[2]  PEXPIRE of the counter, ms (keys.BacklogTTL), integer >= 1
--
-- Returns the counter after the raise.

local cost, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
if cost == nil or cost < 1 or ttl == nil or ttl < 1 then
  return redis.error_reply('ERR backlog_raise: cost and ttl must be integers >= 1')
end
local owed = tonumber(redis.call('GET', KEYS[2])) or 0
local paid = math.min(owed, cost)
if paid > 0 then
  if paid == owed then
    redis.call('DEL', KEYS[2])
  else
    redis.call('DECRBY', KEYS[2], paid)
  end
end
local n = redis.call('INCRBY', KEYS[1], cost - paid)
redis.call('PEXPIRE', KEYS[1], ttl)
return n
