-- job_state_cancel.lua: cancel a job that is waiting (DELETE /v1/jobs/{id}).
--
-- Check-and-set in one step: a job whose state is queued or retrying
-- becomes cancelled, with updated_at (Redis TIME, ms); the drainer drops it
-- when it reaches the head of its lane, without an outflow slot. Any other
-- state is left as it is and returned, so the caller can say why
-- (in_flight, done, dead, cancelled, expired). A cancelled job's id leaves
-- the queued or retrying index (index_leave of job_state_final.lua, which
-- lua.Include puts first). An older cancel marker (the
-- string "cancelled" under KEYS[1]) counts as cancelled.
--
-- KEYS[1]  the job's state hash (keys.JobState)
-- ARGV[1]  PEXPIRE of the state, ms (keys.JobStateTTL)
--
-- Returns {1, previous state} when the job is now cancelled, {0, state}
-- when its state forbids it, {-1, ""} when no state is recorded.

-- pcall: HGET fails (WRONGTYPE) only on the older string marker.
local state = redis.pcall('HGET', KEYS[1], 'state')
if type(state) == 'table' then
  if redis.call('GET', KEYS[1]) == 'cancelled' then return {0, 'cancelled'} end
  return {-1, ''}
end
if not state then
  return {-1, ''}
end
if state ~= 'queued' and state ~= 'retrying' then
  return {0, state}
end
local id = job_id(KEYS[1])
if id then index_leave(KEYS[1], id, 'cancelled') end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'updated_at', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {1, state}
