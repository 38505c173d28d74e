-- schedule_add.lua: store one tenant's scheduled jobs until they are due
-- (ingest; internal/scheduler.Add).
--
-- A scheduled job is not on the queue backend: its envelope waits in the
-- tenant's scheduled hash, its id in the scheduled index scored by its due
-- time, and its state hash (package jobstate) is replaced by state
-- "scheduled" with type, enqueued_at, updated_at and due_at (and
-- heartbeat_ms for a heartbeat job). A drainer's scheduler moves it to the
-- queue when due (schedule_take.lua, schedule_done.lua). A job id already
-- scheduled is replaced, not added twice. A job whose state hash holds its
-- very enqueued_at in a state other than "scheduled" (moved to the queue,
-- cancelled) is this job stored before by a request whose outcome was unknown
-- (queue.ErrUnknownOutcome) and retried with the same id: it is skipped and
-- left as it is, and so is a job in state "scheduled" without enqueued_at,
-- one a scheduler is moving (schedule_take.lua drops it; job ids are never
-- reused, so it is this job): storing it again would re-add its id and
-- enqueued_at under the move, and the move's enqueue would skip it as
-- already queued. A skipped job counts as stored, and its state key's TTL
-- is set again (to itself), a write that orders after the first store's on
-- the replication stream, so the caller's WAIT covers that store. Refused as a whole, writing
-- nothing, when the tenant would hold more than ARGV[1] scheduled jobs.
-- Every key's TTL is at least (latest due − now) + ARGV[2], so a job
-- scheduled beyond keys.JobStateTTL does not expire before it is due.
--
-- KEYS[1]    the scheduled index (keys.JobIndex(t, "scheduled"))
-- KEYS[2]    the scheduled hash (keys.ScheduledJobs)
-- KEYS[3..]  each job's state hash (keys.JobState), in ARGV's order
-- ARGV[1]    the most scheduled jobs the tenant may hold (ingest.max_scheduled)
-- ARGV[2]    PEXPIRE after the due time, ms (keys.JobStateTTL)
-- ARGV[3..]  per job, 6 values: id, due (unix ms), envelope (JSON), type,
--            enqueued_at (unix ms), heartbeat_ms (0: none)
--
-- Returns {1, earliest due ms of the tenant (now when none)} when stored, {0, scheduled
-- count} when refused by the bound.

local n = (#ARGV - 2) / 6
local max = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
-- Every argument is checked before the first write (Redis does not roll
-- back a script that fails halfway).
if n < 1 or n ~= math.floor(n) or #KEYS ~= 2 + n or max == nil or max < 1 or ttl == nil or ttl < 1 then
  return redis.error_reply('ERR schedule_add: want 2 keys + 1 per job, max >= 1, ttl >= 1 and 6 arguments per job')
end
for i = 0, n - 1 do
  local b = 3 + i * 6
  if tonumber(ARGV[b + 1]) == nil or tonumber(ARGV[b + 4]) == nil or tonumber(ARGV[b + 5]) == nil then
    return redis.error_reply('ERR schedule_add: job ' .. (i + 1) .. ': due, enqueued_at and heartbeat_ms must be numbers')
  end
end
-- pcall: HGET fails (WRONGTYPE) only on an older string marker, another job.
local skip, fresh = {}, 0
for i = 0, n - 1 do
  local b = 3 + i * 6
  local st = redis.pcall('HMGET', KEYS[3 + i], 'state', 'enqueued_at')
  if type(st) == 'table' and ((st[1] and st[1] ~= 'scheduled' and st[2] == ARGV[b + 4])
      or (st[1] == 'scheduled' and not st[2])) then
    skip[i] = true
  elseif not redis.call('ZSCORE', KEYS[1], ARGV[b]) then
    fresh = fresh + 1
  end
end
local count = redis.call('ZCARD', KEYS[1])
if count + fresh > max then
  return {0, count}
end

-- A skipped job's state key gets its own TTL again: a write propagated
-- after the first store's, so a WAIT after this script (AddWait) waits for
-- the replicas to hold that store, even on a connection that wrote nothing
-- before.
for i = 0, n - 1 do
  if skip[i] then
    local p = redis.call('PTTL', KEYS[3 + i])
    redis.call('PEXPIRE', KEYS[3 + i], p > 0 and p or ttl)
  end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local latest = now
for i = 0, n - 1 do
  if not skip[i] then
    local b = 3 + i * 6
    local id, due = ARGV[b], tonumber(ARGV[b + 1])
    local sk = KEYS[3 + i]
    redis.call('ZADD', KEYS[1], due, id)
    redis.call('HSET', KEYS[2], id, ARGV[b + 2])
    redis.call('DEL', sk)
    redis.call('HSET', sk, 'state', 'scheduled', 'type', ARGV[b + 3], 'enqueued_at', ARGV[b + 4],
      'updated_at', now, 'due_at', due)
    if tonumber(ARGV[b + 5]) > 0 then
      redis.call('HSET', sk, 'heartbeat_ms', ARGV[b + 5])
    end
    redis.call('PEXPIRE', sk, math.max(due - now, 0) + ttl)
    if due > latest then latest = due end
  end
end
local keep = latest - now + ttl
for _, k in ipairs({KEYS[1], KEYS[2]}) do
  if redis.call('PTTL', k) < keep then redis.call('PEXPIRE', k, keep) end
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
-- Every job skipped from an empty index: the hint is lowered to now,
-- which costs a scheduler one look.
return {1, tonumber(first[2]) or now}
