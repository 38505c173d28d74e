-- lease_defer.lua: hold a leased job aside until its retry time (Redis queue
-- backend). The lease ends and the job waits in the delayed set; claim.lua
-- moves it back to the head of the queue once it is due, so the tenant's
-- lane goes on with other jobs meanwhile and a drainer dying during the wait
-- loses nothing. With KEYS[4..5] the delivery leaves the tenant's
-- deliveries in progress and the job's state becomes "retrying" with its
-- last error (package jobstate), in the same step, and its id moves to the
-- tenant's retrying index (keys.JobIndex, score the due time; index_move of
-- job_state_final.lua, which lua.Include puts first); an older cancel
-- marker (a string under KEYS[4]) is left as it is.
--
-- KEYS[1]  processing zset (keys.Processing)
-- KEYS[2]  leased hash (keys.Leased)
-- KEYS[3]  delayed zset (keys.Delayed)
-- KEYS[4]  optional: the job's state hash (keys.JobState)
-- KEYS[5]  optional: the tenant's deliveries in progress (keys.Delivering)
-- ARGV[1]  lease member (also the delivery's member in KEYS[5])
-- ARGV[2]  delay, ms, from now
-- ARGV[3]  envelope to store (with its attempt count updated)
-- ARGV[4]  PEXPIRE of the delayed set, ms (keys.QueueTTL)
-- ARGV[5]  now, unix ms; "0" reads Redis TIME
-- ARGV[6]  with KEYS[4]: the last delivery error, "" to keep the recorded one
-- ARGV[7]  with KEYS[4]: PEXPIRE of the state, ms (keys.JobStateTTL)
--
-- Returns the due time in unix ms when the lease was held, 0 when it was
-- already lost (the job went back to the queue through a reaper).

local now = tonumber(ARGV[5])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local record = #KEYS >= 5
if record then
  redis.call('ZREM', KEYS[5], ARGV[1])
end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
local due = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[3], due, ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
if record then
  local f = {'state', 'retrying', 'updated_at', now}
  if ARGV[6] ~= '' then f[#f + 1] = 'last_error'; f[#f + 1] = ARGV[6] end
  -- pcall: HSET fails (WRONGTYPE) only on the older string marker.
  local id = job_id(KEYS[4])
  if id then index_leave(KEYS[4], id, 'retrying') end
  if type(redis.pcall('HSET', KEYS[4], unpack(f))) ~= 'table' then
    redis.call('PEXPIRE', KEYS[4], ARGV[7])
    if id then index_add(KEYS[4], id, 'retrying', due) end
  end
end
return due
