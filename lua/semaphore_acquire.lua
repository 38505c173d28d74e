-- semaphore_acquire.lua: take one of a tenant's K in-flight slots, shared by
-- every drainer (the tenant's concurrency cap). A slot is a member of the
-- inflight set scored by its lease deadline; slots whose deadline passed
-- (their drainer died) are dropped first, so a dead drainer's slots come
-- back after one lease period. Holders keep a slot with lease_extend.lua.
--
-- KEYS[1]  inflight zset (keys.Inflight), score = deadline, unix ms
-- ARGV[1]  K, the cap (>= 1)
-- ARGV[2]  member (the job's lease member)
-- ARGV[3]  lease, ms
-- ARGV[4]  now, unix ms; "0" reads Redis TIME
--
-- Returns {1, 0} when the slot is held (also when member held it already),
-- {0, wait_ms} when all K are taken: wait_ms until the earliest deadline.

local now = tonumber(ARGV[4])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
if redis.call('ZSCORE', KEYS[1], ARGV[2]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + lease, ARGV[2])
  redis.call('PEXPIRE', KEYS[1], lease * 2)
  return {1, 0}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = tonumber(first[2]) - now
if wait < 1 then wait = 1 end
return {0, wait}
