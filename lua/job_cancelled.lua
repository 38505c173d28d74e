-- job_cancelled.lua: read a job's cancel marker (Kafka queue backend; the
-- Redis backend reads it inside claim.lua).
--
-- The marker is keys.JobState(tenant, id): a string "cancelled", or a hash
-- whose field state is "cancelled". Any other value, or no key, is not a
-- cancel.
--
-- KEYS[1]  job state key (keys.JobState)
-- ARGV     none
--
-- Returns 1 when the job is cancelled, else 0.

local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'string' then
  if redis.call('GET', KEYS[1]) == 'cancelled' then return 1 end
elseif t == 'hash' then
  if redis.call('HGET', KEYS[1], 'state') == 'cancelled' then return 1 end
end
return 0
