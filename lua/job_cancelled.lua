-- job_cancelled.lua: read a job's cancel marker, and for a heartbeat job its
-- last beat (Kafka queue backend; the Redis backend reads both inside
-- claim.lua).
--
-- The marker is keys.JobState(tenant, id): a string "cancelled", or a hash
-- whose field state is "cancelled". Any other value, or no key, is not a
-- cancel. With ARGV[1] = "1" the script also returns the job's last
-- heartbeat (the hash's beat_at, else its enqueued_at) and Redis TIME, which
-- the drainer compares (queue.Claimed.HeartbeatLapsed).
--
-- The same read returns, when the job's state is done or dead, its recorded
-- enqueued_at (the producer's, else the start_enqueued_at a drainer's start
-- wrote before the producer's post-ack write landed: kafka_take.lua,
-- job_state_dispatch.lua): the drainer settles a copy of a job delivered
-- already unsent when the envelope's enqueued_at is the same
-- (queue.Claimed.Duplicate).
--
-- KEYS[1]  job state key (keys.JobState)
-- ARGV[1]  "1" to read the heartbeat (a heartbeat job), else "0" or absent
--
-- Returns {cancelled (1|0), beat_ms, now_ms, done_ms}: beat_ms and now_ms
-- are 0 unless ARGV[1] is "1" (beat_ms is 0 when no beat is recorded
-- either); done_ms is the recorded enqueued_at (unix ms) when the state is
-- done or dead, else 0.

local beats = ARGV[1] == '1'
local cancelled, beat, now, done = 0, 0, 0, 0
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'string' then
  if redis.call('GET', KEYS[1]) == 'cancelled' then cancelled = 1 end
elseif t == 'hash' then
  local f = redis.call('HMGET', KEYS[1], 'state', 'beat_at', 'enqueued_at', 'start_enqueued_at')
  if f[1] == 'cancelled' then cancelled = 1 end
  if f[1] == 'done' or f[1] == 'dead' then done = tonumber(f[3] or f[4]) or 0 end
  if beats then beat = tonumber(f[2]) or tonumber(f[3]) or 0 end
end
if beats then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
end
return {cancelled, beat, now, done}
