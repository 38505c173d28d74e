-- claim.lua: lease the next job of one tenant (Redis queue backend).
--
-- First moves up to ARGV[5] retries whose time has come from the delayed set
-- to the head of the queue (oldest due first), then LPOPs the head and leases
-- it: the lease member "<job id>|<token>" goes into the processing set scored
-- by its deadline, and the envelope into the leased hash under that member,
-- so a reaper can put it back when the deadline passes.
--
-- The job id is read from the envelope by envelope_id of
-- job_state_final.lua (lua.Include puts it first). The job's cancel marker is the key ARGV[6]..id (keys.JobState,
-- same hash tag): a string "cancelled", or a hash whose field state is
-- "cancelled". The same read takes the job's last heartbeat (the hash's
-- beat_at, else its enqueued_at), which the drainer compares with now for a
-- heartbeat job (queue.Claimed.HeartbeatLapsed), and, when its state is
-- done, its enqueued_at: a job delivered already, which the drainer settles
-- unsent when the envelope's enqueued_at is the same (queue.Claimed.Duplicate:
-- a second copy of one job, as after an enqueue whose outcome was unknown).
--
-- KEYS[1]  queue list (keys.Queue)
-- KEYS[2]  processing zset (keys.Processing), score = lease deadline, unix ms
-- KEYS[3]  leased hash (keys.Leased), member -> envelope
-- KEYS[4]  delayed zset (keys.Delayed), score = due time, unix ms; member = envelope
-- ARGV[1]  now, unix ms; "0" reads Redis TIME
-- ARGV[2]  lease length, ms
-- ARGV[3]  lease token, unique per claim
-- ARGV[4]  PEXPIRE of the tenant's queue keys, ms (keys.QueueTTL)
-- ARGV[5]  at most this many due retries are moved per call
-- ARGV[6]  job-state key prefix (keys.JobState(tenant, ""))
--
-- Returns {member, envelope, cancelled (0|1), next_due_ms, beat_ms, now_ms,
-- done_ms}: member and envelope are "" when the queue is empty; next_due_ms
-- is the due time of the earliest delayed job, or -1 when there is none;
-- beat_ms is the job's last heartbeat (unix ms, 0 when none is recorded);
-- now_ms is the time the claim ran at; done_ms is the recorded enqueued_at
-- (unix ms) of a job whose state is done, else 0.

local now = tonumber(ARGV[1])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local ttl = ARGV[4]

local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
if #due > 0 then
  for i = #due, 1, -1 do
    redis.call('LPUSH', KEYS[1], due[i])
  end
  redis.call('ZREM', KEYS[4], unpack(due))
  redis.call('PEXPIRE', KEYS[1], ttl)
end

local function next_due()
  local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  if #first == 0 then return -1 end
  return tonumber(first[2])
end

local env = redis.call('LPOP', KEYS[1])
if not env then
  return {'', '', 0, next_due(), 0, now, 0}
end

local id = envelope_id(env)

local member = id .. '|' .. ARGV[3]
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), member)
redis.call('HSET', KEYS[3], member, env)
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)

local cancelled, beat, done = 0, 0, 0
if id ~= '?' then
  local sk = ARGV[6] .. id
  local kind = redis.call('TYPE', sk)['ok']
  local state = nil
  if kind == 'string' then
    state = redis.call('GET', sk)
  elseif kind == 'hash' then
    local f = redis.call('HMGET', sk, 'state', 'beat_at', 'enqueued_at')
    state = f[1]
    beat = tonumber(f[2]) or tonumber(f[3]) or 0
    if state == 'done' then done = tonumber(f[3]) or 0 end
  end
  if state == 'cancelled' then cancelled = 1 end
end
return {member, env, cancelled, next_due(), beat, now, done}
