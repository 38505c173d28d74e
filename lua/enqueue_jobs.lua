-- enqueue_jobs.lua: one tenant's enqueue (Redis queue backend), a module of
-- enqueue.lua and submit.lua, after job_state_final.lua (job_id,
-- index_leave, job_index). Run on its own it only defines two local
-- functions and touches nothing.
--
-- The enqueue's arguments start at ARGV[a], its keys at KEYS[k], in the
-- layout of enqueue.lua's header (there a = 1 and k = 1): ARGV[a] queue ttl
-- ms, ARGV[a+1] backlog ttl ms, ARGV[a+2] the jobs' total cost, ARGV[a+3]
-- state ttl ms, then the n envelopes, then per job type, enqueued_at ms,
-- cost, heartbeat_ms; KEYS[k] queue, KEYS[k+1] backlog, KEYS[k+2] enqueue
-- sequence, KEYS[k+3] dispatched sequence, KEYS[k+4 ..] the n job states.
--
--   enqueue_check(a, n)  returns nil when the 4 + 5n arguments from ARGV[a]
--     are valid (ttls and cost integers >= 1), else a message. Reads nothing.
--   enqueue_group(g, ks, as, ns)  the enqueues of several decisions on one
--     tenant, none seen, as one: g lists the decisions j in order, whose
--     keys start at KEYS[ks[j]], arguments at ARGV[as[j]] (enqueue_jobs'
--     layout, all with the same queue key), with ns[j] jobs. The jobs are pushed
--     in that order in one RPUSH, the backlog rises by their costs in one
--     INCRBY, the TTLs, the sequence and the queued index are written once;
--     every job gets its state as enqueue_jobs would write it. The state
--     left is what enqueue_jobs on each decision in turn would leave.
--     Returns queue_length, backlog after the last decision's jobs.
--   enqueue_jobs(k, a, n, seen)  writes as enqueue.lua's header says and
--     returns queue_length, backlog. seen false says no job's id can have
--     been recorded before (ids the caller just made): the resent-job HGET,
--     the old state's index_leave and the DEL are then skipped, which is
--     what they would find. seen true runs them all (enqueue.lua always).

local function enqueue_posint(v)
  local n = num(v)
  if n == nil or n < 1 or n ~= math.floor(n) then
    return nil
  end
  return n
end

local function enqueue_check(a, n)
  if enqueue_posint(ARGV[a]) == nil or enqueue_posint(ARGV[a + 1]) == nil or enqueue_posint(ARGV[a + 2]) == nil then
    return 'ttls and cost must be integers >= 1'
  end
  if enqueue_posint(ARGV[a + 3]) == nil then
    return 'the job state ttl must be an integer >= 1'
  end
  return nil
end

-- write_queued records job i's state "queued" in its hash sk with seq, its
-- arguments after ARGV[last] (type, enqueued_at, cost, heartbeat_ms), and
-- the state TTL ttl.
local function write_queued(sk, last, i, seq, ttl)
  local at = ARGV[last + 4 * i - 2]
  redis.call('HSET', sk, 'state', 'queued', 'type', ARGV[last + 4 * i - 3], 'attempt', 0,
    'enqueued_at', at, 'updated_at', at, 'seq', seq, 'cost', ARGV[last + 4 * i - 1])
  if (num(ARGV[last + 4 * i]) or 0) > 0 then
    redis.call('HSET', sk, 'heartbeat_ms', ARGV[last + 4 * i])
  end
  redis.call('PEXPIRE', sk, ttl)
end

local function enqueue_jobs(k, a, n, seen)
  local cost, state_ttl = num(ARGV[a + 2]), num(ARGV[a + 3])
  local first_env, last = a + 4, a + 3 + n
  -- A job already written with the same enqueued_at is skipped, and so is
  -- a scheduled job cancelled while a scheduler moved it (state cancelled,
  -- its move's enqueued_at kept as move_enqueued_at by schedule_take.lua:
  -- the move's enqueue must not queue it again, whether or not its
  -- schedule_done.lua ever runs). pcall: HMGET fails (WRONGTYPE) only on the
  -- older string marker, which is another job.
  local skip, skipped, skipped_cost = {}, 0, 0
  if seen then
    for i = 1, n do
      local f = redis.pcall('HMGET', KEYS[k + 3 + i], 'enqueued_at', 'state', 'move_enqueued_at')
      local at = ARGV[last + 4 * i - 2]
      if type(f) == 'table' and (f[1] == at or (not f[1] and f[2] == 'cancelled' and f[3] == at)) then
        skip[i] = true
        skipped = skipped + 1
        skipped_cost = skipped_cost + (num(ARGV[last + 4 * i - 1]) or 0)
      end
    end
  end
  -- unpack() is bounded by the Lua C stack (LUAI_MAXCSTACK = 8000), so push
  -- in chunks.
  local chunk = 1000
  local len = 0
  if skipped == 0 then
    for first = first_env, last, chunk do
      len = redis.call('RPUSH', KEYS[k], unpack(ARGV, first, math.min(first + chunk - 1, last)))
    end
  else
    len = redis.call('LLEN', KEYS[k])
    for i = 1, n do
      if not skip[i] then len = redis.call('RPUSH', KEYS[k], ARGV[a + 3 + i]) end
    end
  end
  if skipped == n then
    -- A write propagated after this job's first write (each state key's TTL
    -- set again, to itself): a WAIT after this script waits for the replicas
    -- to hold the first write, even on a connection that wrote nothing
    -- before (a Redis whose WAIT offset moves on writes only).
    for i = 1, n do
      local p = redis.call('PTTL', KEYS[k + 3 + i])
      redis.call('PEXPIRE', KEYS[k + 3 + i], p > 0 and p or state_ttl)
    end
    return len, tonumber(redis.call('GET', KEYS[k + 1])) or 0
  end
  local backlog = redis.call('INCRBY', KEYS[k + 1], math.max(cost - skipped_cost, 1))
  refresh_ttl(KEYS[k], num(ARGV[a]), len == n - skipped)
  refresh_ttl(KEYS[k + 1], num(ARGV[a + 1]), backlog == math.max(cost - skipped_cost, 1))

  local base = seq_base(KEYS[k + 2], KEYS[k + 3])
  local idx = {}
  local c = 0
  for i = 1, n do
    if not skip[i] then
      c = c + 1
      local sk = KEYS[k + 3 + i]
      local id = job_id(sk)
      if id then
        if seen then index_leave(sk, id, 'queued') end
        idx[#idx + 1] = base + c
        idx[#idx + 1] = id
      end
      if seen then redis.call('DEL', sk) end
      write_queued(sk, last, i, base + c, state_ttl)
    end
  end
  redis.call('SET', KEYS[k + 2], base + c, 'PX', state_ttl)
  index_add_all(job_index(KEYS[k + 4], 'queued'), idx, state_ttl)
  return len, backlog
end

local function enqueue_group(g, ks, as, ns)
  local k1 = ks[g[1]]
  local qk, bk = KEYS[k1], KEYS[k1 + 1]
  local buf, nb, len, cost, qttl, bttl, sttl, pushed = {}, 0, 0, 0, 0, 0, 0, 0
  for x = 1, #g do
    local a, n = as[g[x]], ns[g[x]]
    pushed = pushed + n
    for i = a + 4, a + 3 + n do
      nb = nb + 1
      buf[nb] = ARGV[i]
      if nb == 1000 then -- unpack() is bounded by the Lua C stack
        len = redis.call('RPUSH', qk, unpack(buf, 1, nb))
        nb = 0
      end
    end
    cost = cost + num(ARGV[a + 2])
    qttl = math.max(qttl, num(ARGV[a]))
    bttl = math.max(bttl, num(ARGV[a + 1]))
    sttl = math.max(sttl, num(ARGV[a + 3]))
  end
  if nb > 0 then
    len = redis.call('RPUSH', qk, unpack(buf, 1, nb))
  end
  local backlog = redis.call('INCRBY', bk, cost)
  refresh_ttl(qk, qttl, len == pushed)
  refresh_ttl(bk, bttl, backlog == cost)

  local base = seq_base(KEYS[k1 + 2], KEYS[k1 + 3])
  local idx, c = {}, 0
  for x = 1, #g do
    local j = g[x]
    local k, a, n = ks[j], as[j], ns[j]
    local last = a + 3 + n
    for i = 1, n do
      c = c + 1
      local sk = KEYS[k + 3 + i]
      local id = job_id(sk)
      if id then
        idx[#idx + 1] = base + c
        idx[#idx + 1] = id
      end
      write_queued(sk, last, i, base + c, sttl)
    end
  end
  redis.call('SET', KEYS[k1 + 2], base + c, 'PX', sttl)
  index_add_all(job_index(KEYS[k1 + 4], 'queued'), idx, sttl)
  return len, backlog
end
