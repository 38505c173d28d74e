-- schedule_done.lua: end the moves of scheduled jobs that are now on the
-- queue (internal/scheduler, after the Producer's Enqueue returned).
--
-- Each job leaves the moving set and the scheduled hash. Its state hash was
-- rewritten by the enqueue (state queued; on Kafka the post-ack write adds
-- the queue fields only, so a state still scheduled becomes queued here,
-- and one the drainer recorded meanwhile is kept); a job cancelled during its move
-- (its scheduled envelope reads "cancelled", schedule_cancel.lua) is
-- cancelled again here (state cancelled, out of the queued index), so the
-- drainer drops it at the head of its lane. A heartbeat job gets its
-- heartbeat_ms back, and beat_at no earlier than its due time: its
-- heartbeat starts when it is due. A state hash that no longer exists is
-- not created.
--
-- A job that cannot go onto the queue (its stored envelope does not decode,
-- or the queue refuses it: larger than a Kafka produce request takes) has
-- its dead letter in its ARGV: it leaves the move as the others do, and
-- becomes dead (dead_add of dead_letter.lua, record_final of
-- job_state_final.lua, which lua.Include puts first), listed in the DLQ,
-- instead of blocking the tenant's moves for good. A job cancelled during
-- its move stays cancelled.
--
-- KEYS[1]    the scheduled hash (keys.ScheduledJobs)
-- KEYS[2]    the moving set (keys.ScheduledMoving)
-- KEYS[3]    the scheduled index (keys.JobIndex(t, "scheduled"))
-- KEYS[4]    the dead index (keys.JobIndex(t, "dead"))
-- KEYS[5]    the dead letters (keys.DeadRecords)
-- KEYS[6]    the dispatched sequence (keys.JobsDispatched)
-- KEYS[7..]  each job's state hash (keys.JobState), in ARGV's order
-- ARGV[1]    PEXPIRE of a state hash, ms (keys.JobStateTTL)
-- ARGV[2]    the dead letters' TTL, ms (keys.DeadTTL)
-- ARGV[3]    the most dead letters kept (keys.DeadMaxJobs)
-- ARGV[4..]  per job, 4 values: id, due (unix ms), heartbeat_ms (0: none),
--            and "" when it is on the queue, else its dead letter (JSON,
--            dlq.Encode) with reason "poison"
--
-- Returns {moved, next_ms}: moved counts the jobs that were still being
-- moved (not cancelled, not dead); next_ms is the tenant's earliest due
-- time or lease deadline left, -1 when none.

local moved = 0
local n = (#ARGV - 3) / 4
if n ~= math.floor(n) or #KEYS ~= 6 + n or (tonumber(ARGV[1]) or 0) < 1 or (tonumber(ARGV[2]) or 0) < 1 or (tonumber(ARGV[3]) or 0) < 1 then
  return redis.error_reply('ERR schedule_done: want 6 keys + 1 per job, ttls and a dead-letter bound >= 1 and 4 arguments per job')
end
for i = 0, n - 1 do
  if tonumber(ARGV[5 + i * 4]) == nil or tonumber(ARGV[6 + i * 4]) == nil then
    return redis.error_reply('ERR schedule_done: job ' .. (i + 1) .. ': due and heartbeat_ms must be numbers')
  end
end
for i = 0, n - 1 do
  local b = 4 + i * 4
  local id, sk, dead = ARGV[b], KEYS[7 + i], ARGV[b + 3]
  local env = redis.call('HGET', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[1], id)
  local exists = redis.call('EXISTS', sk) == 1
  if env == 'cancelled' then
    if exists then
      local t = redis.call('TIME')
      redis.call('HSET', sk, 'state', 'cancelled', 'updated_at', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
      redis.call('PEXPIRE', sk, ARGV[1])
      redis.call('ZREM', string.match(sk, '^(sluice:{[^}]*})') .. ':jobs:queued', id)
    end
  elseif dead ~= '' then
    if env then
      dead_add(KEYS[4], KEYS[5], id, dead, 0, ARGV[3], ARGV[2])
      if exists then
        record_final(sk, KEYS[6], 'dead', 'the scheduler could not put the job on the queue', 'poison', ARGV[1], nil, '1', nil, nil)
      end
    end
  else
    if env then moved = moved + 1 end
    if exists and redis.call('HGET', sk, 'state') == 'scheduled' then
      local t = redis.call('TIME')
      redis.call('HSET', sk, 'state', 'queued', 'updated_at', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
    end
    if exists and tonumber(ARGV[b + 2]) > 0 then
      local beat = math.max(tonumber(ARGV[b + 1]), tonumber(redis.call('HGET', sk, 'beat_at')) or 0)
      redis.call('HSET', sk, 'heartbeat_ms', ARGV[b + 2], 'beat_at', beat)
    end
  end
end
local nxt = -1
for _, k in ipairs({KEYS[3], KEYS[2]}) do
  local first = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
  if #first > 0 and (nxt < 0 or tonumber(first[2]) < nxt) then nxt = tonumber(first[2]) end
end
return {moved, nxt}
