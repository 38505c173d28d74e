-- ack.lua: finish a leased job (done, dropped or dead), Redis queue backend.
--
-- Removes the lease; when the lease was still held, pushes the dead-letter
-- record (if any), lowers the tenant's backlog by the job's cost (never
-- below 0) and records the job's final state. When the lease was already
-- gone (it expired and a reaper returned the job to the queue) nothing else
-- is written: the job will be delivered again and finished by whoever holds
-- it then, so the backlog is lowered exactly once per job.
--
-- The state record (package jobstate) is the job's hash KEYS[5]: state,
-- updated_at (Redis TIME, ms), last_error and reason when not empty, its TTL
-- refreshed. A job dropped at the head of its queue (cancelled, expired,
-- poison) also moves the tenant's dispatched sequence KEYS[6] up to its
-- seq; a delivered job did that when its delivery started. An older cancel
-- marker (a string under KEYS[5]) is left as it is.
--
-- KEYS[1]  processing zset (keys.Processing)
-- KEYS[2]  leased hash (keys.Leased)
-- KEYS[3]  backlog counter (keys.Backlog)
-- KEYS[4]  dead-letter list (keys.DLQ)
-- KEYS[5]  optional: the job's state hash (keys.JobState); without KEYS[5..7]
--          no state is recorded
-- KEYS[6]  optional: the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[7]  optional: the tenant's deliveries in progress (keys.Delivering)
-- ARGV[1]  lease member (also the delivery's member in KEYS[7])
-- ARGV[2]  job cost, integer >= 1
-- ARGV[3]  PEXPIRE of the backlog counter, ms (keys.BacklogTTL)
-- ARGV[4]  PEXPIRE of the dead-letter list, ms (keys.QueueTTL)
-- ARGV[5]  dead-letter record (JSON), or "" when the job is not dead
-- ARGV[6]  with KEYS[5]: the state to record: done, dead, cancelled, expired
-- ARGV[7]  with KEYS[5]: the last delivery error, "" to keep the recorded one
-- ARGV[8]  with KEYS[5]: why a dead job is dead, or ""
-- ARGV[9]  with KEYS[5]: PEXPIRE of the state and sequence, ms (keys.JobStateTTL)
--
-- Returns 1 when the lease was held and the job is finished, 0 when the
-- lease was lost.

local record = #KEYS >= 7
if record then
  redis.call('ZREM', KEYS[7], ARGV[1])
end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
if ARGV[5] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[5])
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
end
local left = redis.call('DECRBY', KEYS[3], ARGV[2])
if left < 0 then
  redis.call('SET', KEYS[3], 0)
end
redis.call('PEXPIRE', KEYS[3], ARGV[3])
if not record then
  return 1
end

local sk, state, ttl = KEYS[5], ARGV[6], ARGV[9]
local t = redis.call('TIME')
local f = {'state', state, 'updated_at', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
if ARGV[7] ~= '' then f[#f + 1] = 'last_error'; f[#f + 1] = ARGV[7] end
if ARGV[8] ~= '' then f[#f + 1] = 'reason'; f[#f + 1] = ARGV[8] end
-- pcall: HSET fails (WRONGTYPE) only on the older string marker.
if type(redis.pcall('HSET', sk, unpack(f))) == 'table' then
  return 1
end
redis.call('PEXPIRE', sk, ttl)
if state == 'cancelled' or state == 'expired' or ARGV[8] == 'poison' then
  local seq = tonumber(redis.call('HGET', sk, 'seq'))
  if seq and seq > (tonumber(redis.call('GET', KEYS[6])) or 0) then
    redis.call('SET', KEYS[6], seq, 'PX', ttl)
  end
end
return 1
