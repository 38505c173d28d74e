-- release.lua: give a leased job back to the head of its queue, now (Redis
-- queue backend). Used when a drainer stops before dispatching a job.
--
-- KEYS[1]  processing zset (keys.Processing)
-- KEYS[2]  leased hash (keys.Leased)
-- KEYS[3]  queue list (keys.Queue)
-- ARGV[1]  lease member
-- ARGV[2]  envelope to put back (the leased one, or an updated one)
-- ARGV[3]  PEXPIRE of the queue, ms (keys.QueueTTL)
--
-- Returns 1 when the lease was held and the job is back in the queue, 0 when
-- the lease was already lost (a reaper has returned the job already).

if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('LPUSH', KEYS[3], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
