-- reap.lua: return expired leases to the head of the tenant's queue (Redis
-- queue backend), oldest deadline first, in one atomic step: a job is either
-- leased or queued, never both and never neither.
--
-- KEYS[1]  processing zset (keys.Processing)
-- KEYS[2]  leased hash (keys.Leased)
-- KEYS[3]  queue list (keys.Queue)
-- ARGV[1]  now, unix ms; "0" reads Redis TIME
-- ARGV[2]  at most this many leases per call
-- ARGV[3]  PEXPIRE of the queue, ms (keys.QueueTTL)
--
-- Returns the number of leases returned.

local now = tonumber(ARGV[1])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now, 'LIMIT', 0, tonumber(ARGV[2]))
if #expired == 0 then
  return 0
end
local pushed = 0
for i = #expired, 1, -1 do
  local env = redis.call('HGET', KEYS[2], expired[i])
  if env then
    redis.call('LPUSH', KEYS[3], env)
    pushed = pushed + 1
  end
end
redis.call('ZREM', KEYS[1], unpack(expired))
redis.call('HDEL', KEYS[2], unpack(expired))
if pushed > 0 then
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
return pushed
