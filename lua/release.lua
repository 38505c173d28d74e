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
if KEYS[4] then
  local started = tonumber(ARGV[4])
  -- pcall: HMGET fails (WRONGTYPE) only on the older string marker.
  local f = redis.pcall('HMGET', KEYS[4], 'state', 'attempt', 'seq')
  if started and not f['err'] and f[1] == 'in_flight' and tonumber(f[2]) == started then
    redis.call('HSET', KEYS[4], 'state', 'queued', 'attempt', started - 1)
    local id = job_id(KEYS[4])
    if id then
      redis.call('ZREM', job_index(KEYS[4], 'in_flight'), id)
      local seq = tonumber(f[3])
      if seq then
        local qk = job_index(KEYS[4], 'queued')
        redis.call('ZADD', qk, seq, id)
        redis.call('PEXPIRE', qk, JOB_INDEX_TTL)
      end
    end
  end
end
return 1
