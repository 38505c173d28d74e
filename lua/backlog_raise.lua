-- backlog_raise.lua: the Kafka backend's raise of a tenant's backlog
-- counter for the jobs of one acknowledged produce request, less what
-- finishes owe it. job_state_enqueue.lua runs it first (the producer's
-- post-ack write, queue/kafkaq backlog.write: one script call per tenant).
-- lua.Include puts this file before it; run on its own it only defines a
-- local function and touches nothing.
--
-- Kafka hands a record out at its ack, so a drainer can finish a job
-- before this write: backlog_lower.lua then finds the counter short (at 0)
-- and records the shortfall in the owed count, which backlog_raise pays
-- first. Without it the counter would end high by the job's cost, and
-- max_backlog would refuse jobs it should admit.
--
-- backlog_raise(bk, ok, cost, ttl) raises the counter bk by cost less what
-- the owed count ok holds (that much of the debt is paid: DEL or DECRBY of
-- ok) and sets its TTL to ttl ms (keys.BacklogTTL).
--
-- KEYS  none of its own: the including script passes its keys.
-- ARGV  none of its own.
-- Returns (from the function) the counter after the raise.

local function backlog_raise(bk, ok, cost, ttl)
  local owed = tonumber(redis.call('GET', ok)) or 0
  local paid = math.min(owed, cost)
  if paid > 0 then
    if paid == owed then
      redis.call('DEL', ok)
    else
      redis.call('DECRBY', ok, paid)
    end
  end
  local n = redis.call('INCRBY', bk, cost - paid)
  redis.call('PEXPIRE', bk, ttl)
  return n
end
