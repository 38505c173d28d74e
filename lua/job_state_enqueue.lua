-- job_state_enqueue.lua: record the state "queued" of jobs Kafka has
-- acknowledged (Kafka queue backend; the Redis backend does this inside
-- enqueue.lua).
--
-- Each job gets the next number of the tenant's enqueue sequence, from at
-- least the dispatched sequence. This runs after the broker's ack, so a
-- drainer may have started the job already: a state hash that holds a
-- state but no enqueued_at was written by the drainer, and only the fields
-- it lacks (type, enqueued_at, seq, cost) are added, never the state;
-- except that a state scheduled or dead without enqueued_at is a job the
-- scheduler moves or a redrive puts back (both drop enqueued_at first),
-- which becomes queued and joins the queued index. The drainer's start
-- keeps the envelope's enqueued_at in start_enqueued_at (kafka_take.lua,
-- job_state_dispatch.lua): when that is this job's, a dead state is this
-- job's own (it died before this write) and stays; when it is another, the
-- hash is an older job's whose own write never landed, replaced as below.
-- A hash that holds this very job already (the same enqueued_at: a write
-- sent again after a timeout) is left as it is. Any other
-- hash (an older job under a reused id) is replaced, and the job's id joins
-- the tenant's queued index (keys.JobIndex(tenant, "queued"), score its seq)
-- and leaves the index of the older job's state (index_move of
-- job_state_final.lua, which lua.Include puts first). A job without a hash
-- (new: the common case) has no index to leave; the new ones join the
-- queued index in one ZADD at the end, its TTL refreshed by refresh_ttl.
--
-- First, when ARGV[2] is above 0, the tenant's backlog counter rises by
-- it less what finishes owe it (backlog_raise of backlog_raise.lua, which
-- lua.Include puts first), so the producer's whole post-ack write for a
-- tenant is this one call. It comes before the states, so an error reply
-- from past the argument check means the counter rose: the producer then
-- writes again only the states, which this script records idempotently. A call with
-- ARGV[2] above 0 may carry no job (a count held while Redis was down
-- whose states were not kept).
--
-- KEYS[1]   the tenant's enqueue sequence (keys.JobSeq)
-- KEYS[2]   the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[3]   the tenant's backlog counter (keys.Backlog)
-- KEYS[4]   the tenant's owed count (keys.BacklogOwed)
-- KEYS[5..] one job-state hash (keys.JobState) per job, in partition order
-- ARGV[1]   PEXPIRE of the states and sequence, ms (keys.JobStateTTL)
-- ARGV[2]   cost units to raise the backlog counter by, integer 0 to 2^53 - 1
--           (limits.MaxCost: exact in Lua's doubles)
-- ARGV[3]   PEXPIRE of the backlog counter, ms (keys.BacklogTTL), >= 1
-- ARGV[4..] per job, in order: its type, its enqueued_at in unix ms, its cost,
--           its heartbeat interval in ms (0: not a heartbeat job)
--
-- Returns the sequence number of the last job, or 0 for a call without
-- jobs.

local n = #KEYS - 4
local raise, bttl = tonumber(ARGV[2]), tonumber(ARGV[3])
if n < 0 or #ARGV ~= 3 + 4 * n or raise == nil or raise < 0 or raise ~= math.floor(raise) or raise > 9007199254740991 or
    bttl == nil or bttl < 1 or (n == 0 and raise == 0) then
  return redis.error_reply('ERR job_state_enqueue: want the backlog keys, a raise in [0, 2^53 - 1] (> 0 without jobs), a ttl >= 1 and 4 arguments per job key; got ' ..
    #KEYS .. ' keys and ' .. #ARGV .. ' arguments')
end
if raise > 0 then
  backlog_raise(KEYS[3], KEYS[4], raise, bttl)
end
if n == 0 then
  return 0
end
local ttl = ARGV[1]
local base = seq_base(KEYS[1], KEYS[2])
local idx = {}
for i = 1, n do
  local sk = KEYS[4 + i]
  local typ, at, cost, hb = ARGV[4 * i], ARGV[4 * i + 1], ARGV[4 * i + 2], ARGV[4 * i + 3]
  local kind = redis.call('TYPE', sk)['ok']
  local f = kind == 'hash' and redis.call('HMGET', sk, 'state', 'enqueued_at', 'start_enqueued_at')
  local old = f and f[1]
  if old and f[2] == at then
    -- Recorded already: a write sent again after a timeout (the producer's
    -- retry of what Redis did not answer) changes nothing.
  elseif old and not f[2] and (not f[3] or f[3] == at) then
    if (old == 'scheduled' or old == 'dead') and f[3] ~= at then
      local id = job_id(sk)
      if id then index_move(sk, id, 'queued', base + i) end
      redis.call('HSET', sk, 'state', 'queued', 'attempt', 0, 'updated_at', at)
    end
    redis.call('HSET', sk, 'type', typ, 'enqueued_at', at, 'seq', base + i, 'cost', cost)
    if (tonumber(hb) or 0) > 0 then redis.call('HSET', sk, 'heartbeat_ms', hb) end
    redis.call('PEXPIRE', sk, ttl)
  elseif kind == 'hash' or kind == 'none' then
    local id = job_id(sk)
    if kind == 'hash' then
      if id then index_move(sk, id, 'queued', base + i) end
      redis.call('DEL', sk)
    elseif id then
      -- A new job (the common case) joins the queued index in one ZADD
      -- for the call: nothing to leave, nothing to delete.
      idx[#idx + 1] = base + i
      idx[#idx + 1] = id
    end
    redis.call('HSET', sk, 'state', 'queued', 'type', typ, 'attempt', 0, 'enqueued_at', at, 'updated_at', at, 'seq', base + i, 'cost', cost)
    if (tonumber(hb) or 0) > 0 then redis.call('HSET', sk, 'heartbeat_ms', hb) end
    redis.call('PEXPIRE', sk, ttl)
  end
end
index_add_all(job_index(KEYS[5], 'queued'), idx, JOB_INDEX_TTL)
redis.call('SET', KEYS[1], base + n, 'PX', ttl)
return base + n
