-- job_state_final.lua: the write of a job's final state, and the job index,
-- which the job-state scripts share (ack.lua on the Redis queue backend,
-- job_state_settle.lua on Kafka, and the others that include it). lua.Include
-- puts this file before each of them, after the bounds generated from
-- package keys (JOB_INDEX_TTL = keys.JobStateTTL, DONE_RETENTION_MS =
-- keys.DoneRetention, DONE_MAX = keys.DoneMax, all in ms or counts); run on
-- its own it only defines local functions and touches nothing.
--
-- The job index (keys.JobIndex): job_index(sk, state) is the tenant's sorted
-- set of the ids of its jobs in state, built from the hash tag of the job's
-- state key sk, so it is in the job's cluster slot. job_id(sk) is the job id
-- at the end of sk.
--
-- index_leave(sk, id, new_state, pre) reads the job's recorded state and seq
-- from sk (one HMGET; pre, when given, is the caller's pcall of HMGET sk
-- state seq ..., read before any write of this call, and saves it) and ZREMs id from that state's index when it is a
-- listed state other than new_state and other than dead (at most one ZREM):
-- the dead index belongs to the dead letters, which only dlq_remove.lua and
-- the trim of dead_letter.lua remove, so a redrive interrupted before its
-- removal leaves the job listed in the DLQ and its letter reachable; it
-- returns the old state (false when none is recorded, or sk is the older
-- string marker) and the recorded seq (a number, or nil). Call it before the
-- state field is written.
--
-- index_add(sk, id, state, score, no_trim) ZADDs id with score to the index
-- of state when state is queued, in_flight, retrying or done, and refreshes
-- the index's TTL (JOB_INDEX_TTL); unless no_trim, the done index is also
-- trimmed to the members of the last DONE_RETENTION_MS before score, at most
-- DONE_MAX of them. For any other state it does nothing: dead and scheduled
-- are added by their own writers (dlq, scheduler), cancelled and expired are
-- not listed.
--
-- index_move(sk, id, new_state, score) is index_leave then index_add.
--
-- index_leave, index_add and record_final take an optional last argument B,
-- a batch (batch_new): with it, their index writes are collected in B and
-- made by batch_flush(B), one ZREM per index left and one ZADD, PEXPIRE and
-- (for the done index) trim per index joined, and Redis TIME is read once
-- per batch (ack.lua finishes a tenant's jobs so).
--
-- record_final(sk, seqk, state, last_error, reason, ttl, score, tick, pre, B,
-- more) sets the job's state hash sk (package jobstate): state, updated_at
-- (Redis TIME, ms), last_error and reason when not empty, the field-value
-- pairs of the list more when given, its TTL refreshed to ttl ms,
-- and moves the job between the indexes (score: the new state's index
-- score, default updated_at; a retrying job passes its due time). The done
-- index is trimmed (keys.DoneTrimEvery) only when tick is '1' (the caller's
-- first finish of the tenant in a wall second, keys.Refresh), the job's seq
-- is a multiple of DONE_TRIM_EVERY, or it has no seq. A job
-- dropped at the head of its queue (cancelled, expired, poison) also moves
-- the tenant's dispatched sequence seqk up to its seq; a delivered job did
-- that when its delivery started. An older cancel marker (a string under
-- sk) is left as it is. pre is passed on to index_leave.
--
-- envelope_id(env) is the job id of an envelope as stored: read from its
-- head ({"v":N,"id":"..."}, as Go's encoding/json writes queue.Envelope),
-- falling back to cjson for any other field order; '?' when it has none.
--
-- A job's life: the enqueued_at its state hash records (the producer's),
-- else start_enqueued_at, which a drainer's start keeps from the envelope
-- while the hash has none (on Kafka a start can come before the
-- producer's post-ack write). A copy of a job (the same id and
-- enqueued_at) is of the same life; another enqueued_at under the id is
-- another job. For a start of the envelope enqueued at enq (unix ms text,
-- "0": not known) with the hash's fields state, recorded (enqueued_at) and
-- kept (start_enqueued_at), false when missing:
-- - life_done(state, recorded, kept, enq) reports whether this very job is
--   done already (a copy delivered) or dead (its dead letter written: a
--   copy, or its own record handed out again after a revoke, is not
--   delivered after it; a redrive is another life, as dlq drops both
--   fields first), never when enq is "0";
-- - life_attempts(state, recorded, kept, enq) reports whether the recorded
--   attempt counts for this start: the same life, or none recorded yet
--   unless the state is dead (a redrive's previous life: dlq drops both
--   fields before the redrive), and always when enq is "0";
-- - life_elsewhere(state, recorded, kept, started, part, enq) reports
--   whether this very job's delivery is under way from another copy of it:
--   the state is in_flight or retrying, of the same life, and its start
--   came from a copy of this life in another partition (started, the
--   hash's start_part, is "<partition>@<enq>" of another partition: the
--   life is in the value, so a start_part left by another job under the id,
--   which a redrive or a post-ack write that adopts the hash keeps, never
--   refuses this one). Two copies of a job sit in two partitions
--   when the topic gained partitions between a produce whose outcome was
--   unknown and its retry; the copy whose start is recorded is the one
--   delivered (its partition's record stays uncommitted until it settles,
--   so a crash or a revoke hands that one out again), and the other is
--   settled unsent. Never when part is "" (a backend that holds one copy)
--   or enq is "0";
-- - life_copy(state, recorded, kept, started, part, enq) is the copy check
--   both start scripts run: life_done or life_elsewhere, so this start is
--   not delivered;
-- - start_write(sk, attempt, now, recorded, enq, part) writes the start:
--   state in_flight, attempt, updated_at now, start_enqueued_at enq when
--   nothing is recorded and enq is known, and start_part "<part>@<enq>"
--   when part is not "" (nor nil) and enq is known; one HSET.
--
-- undo_start(sk, started) undoes a delivery start a take recorded for a job
-- given back unsent: when the state is still in_flight with attempt
-- started, it becomes queued with attempt started - 1 and the id moves from
-- the in_flight index back to the queued one at its seq. Reports whether it
-- did.
--
-- KEYS  none of its own: the including script passes its keys.
-- ARGV  none of its own.
-- Returns nothing.

local JOB_LISTED = {queued = true, scheduled = true, in_flight = true, retrying = true, dead = true, done = true}
local JOB_ADDED = {queued = true, in_flight = true, retrying = true, done = true}

local function job_index(sk, state)
  return string.match(sk, '^(sluice:{[^}]*})') .. ':jobs:' .. state
end

local function job_id(sk)
  return string.match(sk, '^sluice:{[^}]*}:job:(.*)$')
end

-- batch_new() is an empty batch B for index_leave, index_add and
-- record_final: given one, they collect their index writes in it instead of
-- making them, and take Redis TIME once for all; batch_flush(B) then makes
-- them, one ZREM per index left and one ZADD (and PEXPIRE, and trim) per
-- index joined. A caller that records several jobs in one script (ack.lua)
-- makes a few calls for all of them where each job made its own; it passes
-- each job id at most once per batch.
-- costs_sum(a0, stride, n, off) checks the job costs of a script that
-- finishes n jobs (ARGV[a0 + stride(i-1) + off] for job i) and returns their
-- sum, or nil and a message when one is not an integer >= 1 or the sum
-- passes 2^53 - 1 (limits.MaxCost: a Lua double holds it exactly, and
-- DECRBY gets it as an integer). The callers check before their first
-- write, so a refused call writes nothing.
local function costs_sum(a0, stride, n, off)
  local sum = 0
  for i = 1, n do
    local v = ARGV[a0 + stride * (i - 1) + off]
    local c = tonumber(v)
    if c == nil or c < 1 or c ~= math.floor(c) then
      return nil, 'job ' .. i .. ': cost ' .. v .. ' is not an integer >= 1'
    end
    if c > 9007199254740991 - sum then
      return nil, 'the costs of the ' .. n .. ' jobs sum past 2^53 - 1'
    end
    sum = sum + c
  end
  return sum
end

local function batch_new()
  return {rem = {}, rem_order = {}, add = {}, add_order = {}, trim = {}}
end

local function batch_push(map, order, key, ...)
  local l = map[key]
  if not l then
    l = {}
    map[key] = l
    order[#order + 1] = key
  end
  for _, v in ipairs({...}) do l[#l + 1] = v end
end

local function batch_now(B)
  if B and B.now then return B.now end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if B then B.now = now end
  return now
end

local function index_leave(sk, id, new_state, pre, B)
  -- pcall: HMGET fails (WRONGTYPE) only on the older string marker.
  local f = pre or redis.pcall('HMGET', sk, 'state', 'seq')
  if f['err'] then return false end
  local old, seq = f[1], tonumber(f[2])
  if type(old) ~= 'string' then return false, seq end
  if old ~= new_state and JOB_LISTED[old] and old ~= 'dead' then
    if B then
      batch_push(B.rem, B.rem_order, job_index(sk, old), id)
    else
      redis.call('ZREM', job_index(sk, old), id)
    end
  end
  return old, seq
end

-- refresh_ttl sets key's TTL to ttl ms unless it is already within 1 % of
-- ttl (at most a minute short): a PTTL is a read, which Redis neither
-- propagates nor logs, and a PEXPIRE on every enqueue of a busy tenant was a
-- write to the AOF and the replicas each time. So a queue, its backlog and
-- its queued index (enqueue_jobs.lua, job_state_enqueue.lua) expire between
-- ttl - ttl/100 (ttl - 60 s at most) and ttl after the last enqueue. fresh says the key was just made (the push
-- made the list, the counter was 0): it gets its TTL without the PTTL.
local function refresh_ttl(key, ttl, fresh)
  local left = fresh and -1 or redis.call('PTTL', key)
  if left < 0 or left < ttl - math.min(60000, math.floor(ttl / 100)) then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- seq_base is the last number of a tenant's enqueue sequence (seqk), at
-- least its dispatched sequence (gonek): a sequence that expired never
-- starts behind the jobs already gone.
local function seq_base(seqk, gonek)
  local base = tonumber(redis.call('GET', seqk)) or 0
  local gone = tonumber(redis.call('GET', gonek)) or 0
  if base < gone then base = gone end
  return base
end

-- index_add_all adds idx (score, id pairs) to the index qi in ZADDs of at
-- most 1000 members (unpack() is bounded by the Lua C stack) and refreshes
-- its TTL (refresh_ttl); nothing when idx is empty.
local function index_add_all(qi, idx, ttl)
  if #idx == 0 then return end
  for first = 1, #idx, 2000 do
    redis.call('ZADD', qi, unpack(idx, first, math.min(first + 1999, #idx)))
  end
  refresh_ttl(qi, ttl)
end

-- raise_seq sets the sequence key to seq (PX ttl) unless it holds a higher
-- one: one SET ... GET, which answers the old value, and a second SET only
-- when that was higher (a retry started after newer jobs).
local function raise_seq(key, seq, ttl)
  local old = tonumber(redis.call('SET', key, seq, 'PX', ttl, 'GET'))
  if old and old > seq then
    redis.call('SET', key, old, 'PX', ttl)
  end
end

-- done_trim trims the done index ik to the members of the last
-- DONE_RETENTION_MS before score, at most DONE_MAX of them.
local function done_trim(ik, score)
  redis.call('ZREMRANGEBYSCORE', ik, '-inf', '(' .. (score - DONE_RETENTION_MS))
  local over = redis.call('ZCARD', ik) - DONE_MAX
  if over > 0 then redis.call('ZREMRANGEBYRANK', ik, 0, over - 1) end
end

local function index_add(sk, id, state, score, no_trim, B)
  if not JOB_ADDED[state] then return end
  local ik = job_index(sk, state)
  local trim = state == 'done' and not no_trim
  if B then
    batch_push(B.add, B.add_order, ik, score, id)
    if trim and (B.trim[ik] or -math.huge) < score then B.trim[ik] = score end
    return
  end
  redis.call('ZADD', ik, score, id)
  redis.call('PEXPIRE', ik, JOB_INDEX_TTL)
  if trim then done_trim(ik, score) end
end

-- batch_flush makes the index writes collected in B (batch_new), removals
-- first: a batch holds each job once, so no id is both removed from and
-- added to one index.
local function batch_flush(B)
  for _, ik in ipairs(B.rem_order) do
    local ids = B.rem[ik]
    for first = 1, #ids, 1000 do
      redis.call('ZREM', ik, unpack(ids, first, math.min(first + 999, #ids)))
    end
  end
  for _, ik in ipairs(B.add_order) do
    local entries = B.add[ik]
    for first = 1, #entries, 2000 do
      redis.call('ZADD', ik, unpack(entries, first, math.min(first + 1999, #entries)))
    end
    redis.call('PEXPIRE', ik, JOB_INDEX_TTL)
    if B.trim[ik] then done_trim(ik, B.trim[ik]) end
  end
end

local function index_move(sk, id, new_state, score)
  index_leave(sk, id, new_state)
  index_add(sk, id, new_state, score)
end

local function record_final(sk, seqk, state, last_error, reason, ttl, score, tick, pre, B, more)
  local now = batch_now(B)
  local f = {'state', state, 'updated_at', now}
  if last_error ~= '' then f[#f + 1] = 'last_error'; f[#f + 1] = last_error end
  if reason ~= '' then f[#f + 1] = 'reason'; f[#f + 1] = reason end
  if more then for _, v in ipairs(more) do f[#f + 1] = v end end
  local id = job_id(sk)
  local seq
  if id then
    local _old
    _old, seq = index_leave(sk, id, state, pre, B)
  end
  -- pcall: HSET fails (WRONGTYPE) only on the older string marker.
  if type(redis.pcall('HSET', sk, unpack(f))) == 'table' then
    return
  end
  -- A dead job's state lives as long as its dead letter (keys.DeadTTL).
  if state == 'dead' then ttl = math.max(tonumber(ttl), DEAD_STATE_TTL) end
  redis.call('PEXPIRE', sk, ttl)
  local no_trim = tick ~= '1' and seq ~= nil and seq % DONE_TRIM_EVERY ~= 0
  if id then index_add(sk, id, state, score or now, no_trim, B) end
  if state == 'cancelled' or state == 'expired' or reason == 'poison' then
    if not id then seq = tonumber(redis.call('HGET', sk, 'seq')) end
    if seq and seq > (tonumber(redis.call('GET', seqk)) or 0) then
      redis.call('SET', seqk, seq, 'PX', ttl)
    end
  end
end

local function life_done(state, recorded, kept, enq)
  return (state == 'done' or state == 'dead') and enq ~= '0' and (recorded or kept) == enq
end

local function life_attempts(state, recorded, kept, enq)
  if enq == '0' or recorded == enq then return true end
  if recorded then return false end
  if kept then return kept == enq end
  return state ~= 'dead'
end

local function life_elsewhere(state, recorded, kept, started, part, enq)
  if not (state == 'in_flight' or state == 'retrying') or type(part) ~= 'string' or part == ''
    or enq == '0' or type(started) ~= 'string' or (recorded or kept) ~= enq then
    return false
  end
  local life = '@' .. enq
  return started ~= part .. life and string.sub(started, -#life) == life
end

local function life_copy(state, recorded, kept, started, part, enq)
  return life_done(state, recorded, kept, enq) or life_elsewhere(state, recorded, kept, started, part, enq)
end

local function start_write(sk, attempt, now, recorded, enq, part)
  local f = {'state', 'in_flight', 'attempt', attempt, 'updated_at', now}
  if not recorded and enq ~= '0' then f[#f + 1] = 'start_enqueued_at'; f[#f + 1] = enq end
  if part and part ~= '' and enq ~= '0' then f[#f + 1] = 'start_part'; f[#f + 1] = part .. '@' .. enq end
  redis.call('HSET', sk, unpack(f))
end

local function undo_start(sk, started)
  started = tonumber(started)
  -- pcall: HMGET fails (WRONGTYPE) only on the older string marker.
  local f = redis.pcall('HMGET', sk, 'state', 'attempt', 'seq')
  if not started or f['err'] or f[1] ~= 'in_flight' or tonumber(f[2]) ~= started then
    return false
  end
  redis.call('HSET', sk, 'state', 'queued', 'attempt', started - 1)
  local id = job_id(sk)
  if id then
    redis.call('ZREM', job_index(sk, 'in_flight'), id)
    local seq = tonumber(f[3])
    if seq then
      local qk = job_index(sk, 'queued')
      redis.call('ZADD', qk, seq, id)
      redis.call('PEXPIRE', qk, JOB_INDEX_TTL)
    end
  end
  return true
end

local function envelope_id(env)
  local id = string.match(env, '^{"v":%d+,"id":"([^"\\]*)"')
  if id ~= nil then return id end
  local ok, dec = pcall(cjson.decode, env)
  if ok and type(dec) == 'table' and type(dec.id) == 'string' then return dec.id end
  return '?'
end
