-- enqueue.lua: append one tenant's jobs to its queue, add their cost to its
-- backlog counter and record each job's state "queued" with its place in the
-- tenant's enqueue sequence, atomically (Redis queue backend). Each job's
-- id joins the tenant's queued index (keys.JobIndex(tenant, "queued"), score
-- its seq) and leaves the index of the state an older job under the same id
-- had (index_leave and job_index of job_state_final.lua, which lua.Include
-- puts first).
--
-- KEYS[1]   the tenant's queue list (keys.Queue); jobs are RPUSHed to its tail,
--           so consumers take the oldest job from its head
-- KEYS[2]   the tenant's backlog counter (keys.Backlog), in cost units
-- KEYS[3]   the tenant's enqueue sequence (keys.JobSeq)
-- KEYS[4]   the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[5..] one job-state hash (keys.JobState) per job, in the jobs' order
-- ARGV[1]   PEXPIRE of the queue in milliseconds (keys.QueueTTL), integer >= 1
-- ARGV[2]   PEXPIRE of the backlog counter in milliseconds (keys.BacklogTTL),
--           integer >= 1
-- ARGV[3]   total cost of the jobs, integer >= 1
-- ARGV[4]   PEXPIRE of the job states and sequences, ms (keys.JobStateTTL)
-- ARGV[5..4+n]      the n job envelopes (JSON), pushed in this order
-- ARGV[5+n..4+5n]   per job, in order: its type, its enqueued_at in unix ms, its
--                   cost (kept in the state hash for a purge's backlog count),
--                   its heartbeat interval in ms (0: not a heartbeat job)
--
-- Each job's state hash is replaced by {state=queued, type, attempt=0,
-- enqueued_at, updated_at=enqueued_at, seq}; seq continues the tenant's
-- sequence, from at least the dispatched sequence (so a sequence that
-- expired never starts behind the jobs already gone). A job whose state
-- hash holds its very enqueued_at already is this job written before (an
-- enqueue sent again after its outcome was unknown, queue.ErrUnknownOutcome):
-- it is skipped, neither pushed nor counted, and its state is left as it is
-- (when every job is skipped, their state keys' TTLs are set again, to
-- themselves, so that a WAIT after the script covers the first write).
--
-- Returns {queue_length, backlog}: the list's length and the counter's value
-- after the write (ARGV[3] is the cost of all the jobs; the counter rises by
-- the cost of those not skipped). Every argument is checked before the first write, so a bad
-- call writes nothing (Redis does not roll back a script that fails halfway).

local function posint(v)
  local n = tonumber(v)
  if n == nil or n < 1 or n ~= math.floor(n) then
    return nil
  end
  return n
end

local queue_ttl = posint(ARGV[1])
local backlog_ttl = posint(ARGV[2])
local cost = posint(ARGV[3])
if queue_ttl == nil or backlog_ttl == nil or cost == nil then
  return redis.error_reply('ERR enqueue: ttls and cost must be integers >= 1')
end
local n = #KEYS - 4
if n < 1 or #ARGV < 5 then
  return redis.error_reply('ERR enqueue: no jobs')
end
local state_ttl = posint(ARGV[4])
if state_ttl == nil then
  return redis.error_reply('ERR enqueue: the job state ttl must be an integer >= 1')
end
if #ARGV ~= 4 + 5 * n then
  return redis.error_reply('ERR enqueue: ' .. n .. ' job state keys but ' .. (#ARGV - 4) .. ' job arguments, want ' .. 5 * n)
end

local last = 4 + n
-- A job already written with the same enqueued_at is skipped (pcall: HGET
-- fails (WRONGTYPE) only on the older string marker, which is another job).
local skip, skipped, skipped_cost = {}, 0, 0
for i = 1, n do
  local was = redis.pcall('HGET', KEYS[4 + i], 'enqueued_at')
  if type(was) == 'string' and was == ARGV[last + 4 * i - 2] then
    skip[i] = true
    skipped = skipped + 1
    skipped_cost = skipped_cost + (tonumber(ARGV[last + 4 * i - 1]) or 0)
  end
end

-- unpack() is bounded by the Lua C stack (LUAI_MAXCSTACK = 8000), so push in
-- chunks.
local chunk = 1000
local len = 0
if skipped == 0 then
  for first = 5, last, chunk do
    len = redis.call('RPUSH', KEYS[1], unpack(ARGV, first, math.min(first + chunk - 1, last)))
  end
else
  len = redis.call('LLEN', KEYS[1])
  for i = 1, n do
    if not skip[i] then len = redis.call('RPUSH', KEYS[1], ARGV[4 + i]) end
  end
end
local backlog
if skipped == n then
  -- A write propagated after this job's first write (each state key's TTL
  -- set again, to itself): a WAIT after this script waits for the replicas
  -- to hold the first write, even on a connection that wrote nothing before.
  for i = 1, n do
    local p = redis.call('PTTL', KEYS[4 + i])
    redis.call('PEXPIRE', KEYS[4 + i], p > 0 and p or state_ttl)
  end
  backlog = tonumber(redis.call('GET', KEYS[2])) or 0
  return {len, backlog}
end
backlog = redis.call('INCRBY', KEYS[2], math.max(cost - skipped_cost, 1))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])

local base = tonumber(redis.call('GET', KEYS[3])) or 0
local gone = tonumber(redis.call('GET', KEYS[4])) or 0
if base < gone then base = gone end
local idx = {}
local k = 0
for i = 1, n do
  if not skip[i] then
  k = k + 1
  local sk = KEYS[4 + i]
  local at = ARGV[last + 4 * i - 2]
  local id = job_id(sk)
  if id then
    index_leave(sk, id, 'queued')
    idx[#idx + 1] = base + k
    idx[#idx + 1] = id
  end
  redis.call('DEL', sk)
  redis.call('HSET', sk, 'state', 'queued', 'type', ARGV[last + 4 * i - 3], 'attempt', 0,
    'enqueued_at', at, 'updated_at', at, 'seq', base + k, 'cost', ARGV[last + 4 * i - 1])
  if (tonumber(ARGV[last + 4 * i]) or 0) > 0 then
    redis.call('HSET', sk, 'heartbeat_ms', ARGV[last + 4 * i])
  end
  redis.call('PEXPIRE', sk, state_ttl)
  end
end
redis.call('SET', KEYS[3], base + k, 'PX', state_ttl)
if #idx > 0 then
  local qk = job_index(KEYS[5], 'queued')
  for first = 1, #idx, 2 * chunk do
    redis.call('ZADD', qk, unpack(idx, first, math.min(first + 2 * chunk - 1, #idx)))
  end
  redis.call('PEXPIRE', qk, state_ttl)
end
return {len, backlog}
