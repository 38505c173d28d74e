-- lease_extend.lua: push the deadline of leases still held to now + lease
-- (Redis queue backend). Leases that were lost (reaped) are not recreated.
--
-- KEYS[1]  processing zset (keys.Processing)
-- ARGV[1]  now, unix ms; "0" reads Redis TIME
-- ARGV[2]  lease length, ms
-- ARGV[3..] lease members
--
-- Returns the members whose lease was no longer held.

local now = tonumber(ARGV[1])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local deadline = now + tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], deadline, ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
