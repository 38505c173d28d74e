-- lease_defer.lua: hold a leased job aside until its retry time (Redis queue
-- backend). The lease ends and the job waits in the delayed set; claim.lua
-- moves it back to the head of the queue once it is due, so the tenant's lane
-- goes on with other jobs meanwhile and a drainer dying during the wait loses
-- nothing.
--
-- KEYS[1]  processing zset (keys.Processing)
-- KEYS[2]  leased hash (keys.Leased)
-- KEYS[3]  delayed zset (keys.Delayed)
-- ARGV[1]  lease member
-- ARGV[2]  delay, ms, from now
-- ARGV[3]  envelope to store (with its attempt count updated)
-- ARGV[4]  PEXPIRE of the delayed set, ms (keys.QueueTTL)
-- ARGV[5]  now, unix ms; "0" reads Redis TIME
--
-- Returns the due time in unix ms when the lease was held, 0 when it was
-- already lost (the job went back to the queue through a reaper).

local now = tonumber(ARGV[5])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
local due = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[3], due, ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return due
