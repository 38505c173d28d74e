-- schedule_cancel.lua: cancel a scheduled job (DELETE /v1/jobs/{id};
-- internal/scheduler.Cancel). A job in any other state is left as it is and
-- its state returned, for job_state_cancel.lua to decide.
--
-- A scheduled job leaves the scheduled index and hash and becomes
-- cancelled (updated_at, Redis TIME). One a scheduler is moving (in the
-- moving set) keeps its place there and its envelope is replaced by
-- "cancelled", so schedule_done.lua cancels it again after its enqueue and
-- schedule_take.lua does not take it again.
--
-- KEYS[1]  the job's state hash (keys.JobState)
-- KEYS[2]  the scheduled index (keys.JobIndex(t, "scheduled"))
-- KEYS[3]  the scheduled hash (keys.ScheduledJobs)
-- KEYS[4]  the moving set (keys.ScheduledMoving)
-- ARGV[1]  the job id
-- ARGV[2]  PEXPIRE of the state, ms (keys.JobStateTTL)
--
-- Returns {1, "scheduled"} when the job is now cancelled, {0, state} when it
-- is not scheduled (state "" when none is recorded).

-- pcall: HGET fails (WRONGTYPE) only on the older string cancel marker.
local state = redis.pcall('HGET', KEYS[1], 'state')
if type(state) == 'table' or not state then
  return {0, ''}
end
if state ~= 'scheduled' then
  return {0, state}
end
local id = ARGV[1]
if redis.call('ZSCORE', KEYS[4], id) then
  redis.call('HSET', KEYS[3], id, 'cancelled')
else
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'state', 'cancelled', 'updated_at', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, 'scheduled'}
