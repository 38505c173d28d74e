-- lease_defer.lua: hold a leased job aside until its retry time (Redis queue
-- backend). Runs with job_state_lib.lua prepended (jobstate.Script).
--
-- The lease ends and the job waits in the delayed set; claim.lua moves it
-- back to the head of the queue once it is due, so the tenant's lane goes on
-- with other jobs meanwhile and a drainer dying during the wait loses
-- nothing. With KEYS[4..6] the job's state becomes "retrying" with its last
-- error, in the same step.
--
-- KEYS[1]  processing zset (keys.Processing)
-- KEYS[2]  leased hash (keys.Leased)
-- KEYS[3]  delayed zset (keys.Delayed)
-- KEYS[4]  optional: the job's state hash (keys.JobState)
-- KEYS[5]  optional: the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[6]  optional: the tenant's deliveries in progress (keys.Delivering)
-- ARGV[1]  lease member (also the delivery's member in KEYS[6])
-- ARGV[2]  delay, ms, from now
-- ARGV[3]  envelope to store (with its attempt count updated)
-- ARGV[4]  PEXPIRE of the delayed set, ms (keys.QueueTTL)
-- ARGV[5]  now, unix ms; "0" reads Redis TIME
-- ARGV[6]  with KEYS[4]: the last delivery error, "" to keep the recorded one
-- ARGV[7]  with KEYS[4]: PEXPIRE of the state and sequence, ms (keys.JobStateTTL)
--
-- Returns the due time in unix ms when the lease was held, 0 when it was
-- already lost (the job went back to the queue through a reaper).

local now = js.now_ms(ARGV[5])
local record = #KEYS >= 6
if record then
  redis.call('ZREM', KEYS[6], ARGV[1])
end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
local due = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[3], due, ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
if record then
  js.settle(KEYS[4], KEYS[5], KEYS[6], ARGV[1], 'retrying', '', ARGV[6], '', now, ARGV[7])
end
return due
