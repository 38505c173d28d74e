-- job_beat.lua: read, and when asked refresh, a heartbeat job's last beat
-- (GET /v1/jobs/{id} by the job's tenant key, POST /v1/jobs/{id}:heartbeat;
-- ingest).
--
-- A job whose state hash has heartbeat_ms > 0 is a heartbeat job. With
-- ARGV[1] = "1", one that still waits (queued, scheduled or retrying) gets
-- beat_at = Redis TIME. Its last beat is the latest of beat_at,
-- enqueued_at and due_at (a scheduled job's heartbeat starts when it is
-- due, as queue.Claimed.HeartbeatLapsed counts it). Other jobs, and a missing or older string marker, are untouched.
--
-- KEYS[1]  the job's state hash (keys.JobState)
-- ARGV[1]  "1" to refresh the beat, "0" to read only
--
-- Returns {heartbeat_ms, beat_ms, now_ms, due_ms}: heartbeat_ms 0 for a job
-- that is not a heartbeat job (then beat_ms is 0); due_ms is a scheduled
-- job's due_at, else 0.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  return {0, 0, now, 0}
end
local f = redis.call('HMGET', KEYS[1], 'state', 'heartbeat_ms', 'beat_at', 'enqueued_at', 'due_at')
local hb = tonumber(f[2]) or 0
local due = 0
if f[1] == 'scheduled' then due = tonumber(f[5]) or 0 end
if hb <= 0 then
  return {0, 0, now, due}
end
local beat = math.max(tonumber(f[3]) or 0, tonumber(f[4]) or 0, tonumber(f[5]) or 0)
local st = f[1]
if ARGV[1] == '1' and (st == 'queued' or st == 'scheduled' or st == 'retrying') then
  redis.call('HSET', KEYS[1], 'beat_at', now)
  beat = math.max(beat, now)
end
return {hb, beat, now, due}
