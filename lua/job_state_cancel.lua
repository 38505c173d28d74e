-- job_state_cancel.lua: cancel a job that is waiting (DELETE /v1/jobs/{id}).
-- Runs with job_state_lib.lua prepended (jobstate.Script).
--
-- Check-and-set in one step: a job whose state is queued or retrying
-- becomes cancelled (the drainer drops it when it reaches the head of its
-- lane, without an outflow slot); any other state is left as it is and
-- returned, so the caller can say why (in_flight, done, dead, cancelled,
-- expired).
--
-- KEYS[1]  the job's state hash (keys.JobState)
-- ARGV[1]  now, unix ms; "0" reads Redis TIME
-- ARGV[2]  PEXPIRE of the state, ms (keys.JobStateTTL)
--
-- Returns {1, previous state} when the job is now cancelled, {0, state}
-- when its state forbids it, {-1, ""} when no state is recorded.

local state = js.state(KEYS[1])
if state == nil then
  return {-1, ''}
end
if state ~= 'queued' and state ~= 'retrying' then
  return {0, state}
end
js.set(KEYS[1], {'state', 'cancelled', 'updated_at', js.now_ms(ARGV[1])}, ARGV[2])
return {1, state}
