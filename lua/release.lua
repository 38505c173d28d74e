-- release.lua: give a leased job back to the head of its queue, now (Redis
-- queue backend). Used when a drainer stops before dispatching a job.
--
-- KEYS[1]  processing zset (keys.Processing)
-- KEYS[2]  leased hash (keys.Leased)
-- KEYS[3]  queue list (keys.Queue)
-- ARGV[1]  lease member
-- ARGV[2]  envelope to put back (the leased one, or an updated one)
-- ARGV[3]  PEXPIRE of the queue, ms (keys.QueueTTL)
-- KEYS[4]  optional: the job's state hash (keys.JobState), for a job whose
--          start take.lua recorded but which was not sent: when its state is
--          still in_flight with attempt ARGV[4], the start is undone (state
--          queued, attempt ARGV[4] - 1, its id back from the in_flight index
--          to the queued one at its seq), so Sluice-Attempt skips no number
--          and the queued job can be cancelled (lua.Include puts
--          job_state_final.lua first)
-- ARGV[4]  with KEYS[4]: the attempt number the take recorded
--
-- Returns 1 when the lease was held and the job is back in the queue, 0 when
-- the lease was already lost (a reaper has returned the job already).

if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('LPUSH', KEYS[3], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
if KEYS[4] then undo_start(KEYS[4], ARGV[4]) end
return 1
