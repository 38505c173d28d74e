-- schedule_take.lua: lease up to ARGV[2] of a tenant's due scheduled jobs
-- for moving them to the queue (internal/scheduler).
--
-- First the jobs whose move lease passed (their mover died before
-- schedule_done.lua) are taken again, then due jobs leave the scheduled
-- index. Each taken job goes into the moving set scored by its lease
-- deadline (now + ARGV[3]), so two schedulers never move the same job while
-- the lease holds. A job whose envelope is gone or reads "cancelled" (it
-- was cancelled) is dropped from the moving set and not returned. With
-- ARGV[2] = 0 nothing is taken: the call reads the next due time and the
-- count only. A taken job's state hash still in state scheduled loses
-- enqueued_at, kept as move_enqueued_at (its state stays scheduled; a
-- job cancelled during its move keeps it, so enqueue.lua knows the move's
-- enqueue for the cancelled job's and skips it; a state the mover's own enqueue
-- already wrote, queued or later, is left whole, so the retake after an
-- unknown enqueue is skipped by enqueue.lua): the Kafka producer's post-ack write (job_state_enqueue.lua)
-- then adds its queue fields without replacing a state the drainer may have
-- recorded first (in_flight, done: Kafka can hand a job out before that
-- write), and schedule_done.lua turns a state still scheduled into queued.
--
-- KEYS[1]  the scheduled index (keys.JobIndex(t, "scheduled")), score = due ms
-- KEYS[2]  the scheduled hash (keys.ScheduledJobs), id → envelope
-- KEYS[3]  the moving set (keys.ScheduledMoving), score = lease deadline ms
-- ARGV[1]  now, unix ms; "0" reads Redis TIME
-- ARGV[2]  at most this many jobs are taken
-- ARGV[3]  the move lease, ms
-- ARGV[4]  PEXPIRE of the moving set, ms (keys.JobStateTTL)
-- ARGV[5]  job-state key prefix (keys.JobState(tenant, "")), same hash tag
--
-- Returns {now_ms, next_ms, count, id1, envelope1, id2, envelope2, ...}:
-- next_ms is the earliest due time or lease deadline left (after this
-- take), -1 when none; count is the tenant's scheduled jobs not yet moved
-- (index and moving set).

local now = tonumber(ARGV[1])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local max = tonumber(ARGV[2])
if max == nil or max < 0 or (tonumber(ARGV[3]) or 0) < 1 or (tonumber(ARGV[4]) or 0) < 1 then
  return redis.error_reply('ERR schedule_take: want max >= 0, a lease >= 1 ms and a ttl >= 1 ms')
end
local out = {now, -1, 0}
if max > 0 then
  local ids = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, max)
  if #ids < max then
    local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, max - #ids)
    if #due > 0 then
      redis.call('ZREM', KEYS[1], unpack(due))
      for _, id in ipairs(due) do ids[#ids + 1] = id end
    end
  end
  for _, id in ipairs(ids) do
    local env = redis.call('HGET', KEYS[2], id)
    if not env or env == 'cancelled' then
      redis.call('ZREM', KEYS[3], id)
      redis.call('HDEL', KEYS[2], id)
    else
      redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), id)
      -- pcall: HMGET fails (WRONGTYPE) only on an older string marker.
      local f = redis.pcall('HMGET', ARGV[5] .. id, 'state', 'enqueued_at')
      if type(f) == 'table' and f[1] == 'scheduled' then
        redis.call('HDEL', ARGV[5] .. id, 'enqueued_at')
        if f[2] then redis.call('HSET', ARGV[5] .. id, 'move_enqueued_at', f[2]) end
      end
      out[#out + 1] = id
      out[#out + 1] = env
    end
  end
  if #out > 3 then redis.call('PEXPIRE', KEYS[3], ARGV[4]) end
end
local nxt = -1
for _, k in ipairs({KEYS[1], KEYS[3]}) do
  local first = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
  if #first > 0 and (nxt < 0 or tonumber(first[2]) < nxt) then nxt = tonumber(first[2]) end
end
out[2] = nxt
out[3] = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[3])
return out
