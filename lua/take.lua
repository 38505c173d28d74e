-- take.lua: lease up to k head jobs of one tenant and start the delivery of
-- each that needs no check of the drainer's, in one call (Redis queue
-- backend; docs/perf.md 2.2, levers L1 + L3, for a tenant without a
-- concurrency cap, with or without an outflow rate). lua.Include puts
-- job_state_final.lua (job_id, job_index, JOB_LISTED), bucket_level.lua and
-- outflow_count.lua first.
--
-- First moves up to ARGV[5] due retries from the delayed set to the head of
-- the queue, as claim.lua does, then LPOPs up to k jobs and leases each as
-- claim.lua does (member "<job id>|<ARGV[3]>.<i>" in the processing set,
-- scored by its deadline, and the envelope in the leased hash), in one ZADD
-- and one HSET for all of them.
--
-- A leased job is started here (what job_state_dispatch.lua does, for all
-- started jobs of the call at once) only when its state hash says it is a
-- plain job: state queued, retrying or in_flight (a reaped or released
-- job), enqueued_at recorded, no heartbeat_ms, and the envelope names no
-- deadline (no '"deadline":' in it; a payload holding that text only costs
-- the job the separate start). Its state becomes in_flight with attempt =
-- recorded + 1 (at least the envelope's attempts + 1, which the Go side
-- checks: take returns the recorded enqueued_at), updated_at now; its id
-- moves from its old index to the in_flight one; the dispatched sequence
-- rises to the highest seq started. The delivery in progress is its lease
-- (a started job is leased, so tenant_stats.lua counts the processing set):
-- it does not join keys.Delivering. Any other job (cancelled,
-- done already, a heartbeat job, one with a deadline, poison, the older
-- string marker) is leased only and returned with claim.lua's fields, and
-- the drainer drops it or records its start as before, so no drop spends a
-- start.
--
-- The units of the jobs it starts (their recorded cost, at least 1) join
-- the tenant's outflow (KEYS[6], keys.Outflow) in the unix second of their
-- send (now plus the job's delay), as outflow_add.lua writes the drainer's
-- counts (outflow_count), when ARGV[13] > 0; the drainer then leaves them
-- out of its own counts (queue.Claimed.Counted), so a start costs no
-- flush call.
--
-- With a rate (ARGV[9] > 0) the call passes the jobs through the tenant's
-- shared outflow bucket as leaky_bucket.lua does (KEYS[7], KEYS[8]; the
-- same rules, override and adaptive rate; bucket_level.lua): when not even
-- a job of cost 1 fits within ARGV[12] µs it pops nothing and returns the
-- wait; else it pops at most as many head jobs as turns of cost 1 fall due
-- within ARGV[12] µs (and at most k), and gives them their turns in queue
-- order. A plain job whose recorded cost fits now, or within ARGV[12] µs,
-- takes its turn (the water rises by its cost, above the capacity by what
-- leaks in that wait, so every other ask sees the turn spent) and starts,
-- and its delay_us tells the drainer to send it that much after the answer,
-- so no send is early and a refused ask is saved. The first job whose turn
-- falls later goes back to the head with the jobs popped after it (one
-- LPUSH); when that is the first job the call returns its wait with nothing
-- leased. A job that is not plain, or has no recorded cost, or whose cost
-- exceeds the capacity (it can never pass), takes no turn: as the first job
-- it is leased unstarted, alone (the rest go back), and the drainer passes
-- it through the bucket itself (and dead-letters the last kind); after a
-- granted one it goes back to the head with the rest, so turns are granted
-- in queue order. The water is written once per call.
--
-- The state, index and sequence keys are built from ARGV[6] (keys.JobState
-- of the tenant, same hash tag as KEYS), as claim.lua builds the state key.
--
-- KEYS[1]  queue list (keys.Queue)
-- KEYS[2]  processing zset (keys.Processing)
-- KEYS[3]  leased hash (keys.Leased)
-- KEYS[4]  delayed zset (keys.Delayed)
-- KEYS[5]  dispatched sequence (keys.JobsDispatched)
-- KEYS[6]  outflow per second (keys.Outflow), field = unix second
-- ARGV[1]  now, unix ms; "0" reads Redis TIME
-- ARGV[2]  lease length, ms
-- ARGV[3]  lease token base, unique per call; job i gets "<base>.<i>"
-- ARGV[4]  PEXPIRE of the tenant's queue keys, ms (keys.QueueTTL)
-- ARGV[5]  at most this many due retries are moved per call
-- ARGV[6]  job-state key prefix (keys.JobState(tenant, ""))
-- ARGV[7]  k: at most this many jobs, an integer in [1, 64]
-- ARGV[8]  PEXPIRE of a job's state and the dispatched sequence, ms
--          (keys.JobStateTTL)
-- ARGV[9]  outflow rate, units/s; 0: no bucket (KEYS[7..8] and ARGV[10..12]
--          unused)
-- ARGV[10] outflow capacity, units (> 0 with a rate)
-- ARGV[11] TTL margin of the water hash, ms (keys.WaterMargin)
-- ARGV[12] with a rate: a turn due within this many µs is granted now, for
--          a send that much later (levers L10, L15; 0: only turns free now)
-- ARGV[13] PEXPIRE of KEYS[6], ms (keys.OutflowTTL); 0: the starts are not
--          counted here
-- KEYS[7]  with a rate: the water hash (keys.Water)
-- KEYS[8]  with a rate: the override hash (keys.Override)
--
-- Returns {now_us, next_due_ms, n, wait_us, water_micro, rate_milli, then
-- per job member, envelope, cancelled (0|1), beat_ms, done_ms, attempt,
-- enqueued_ms, delay_us}: now_us is the call's clock, unix µs (the
-- bucket's, or Redis TIME without one; its ms are the now of every other
-- time here): a started job's turn falls at now_us + delay_us on it, which
-- the drainer maps to its own clock; next_due_ms is the due time of the earliest
-- delayed job, or -1 when there is none (read only when n is 0); attempt is
-- the delivery's number when it was started here, 0 when not; enqueued_ms
-- the recorded enqueued_at of a started job (0 otherwise); cancelled,
-- beat_ms and done_ms as claim.lua's; delay_us the wait before a started
-- job's send (a turn granted ahead; 0 without a rate, or for a turn free
-- now). With a rate, wait_us (>= 1 when no turn was free: n is 0 then;
-- when jobs were started, the wait until a further turn of cost 1 is free
-- after theirs, 0 when it is free now, so the drainer makes no ask that is
-- bound to be refused) and the bucket's level after the call and rate used
-- as leaky_bucket.lua returns them; all 0 without one.
-- Errors: "take: <argument> <value> is out of range", as leaky_bucket.lua
-- names a refused rate, capacity, margin or override (and k, and the outflow
-- TTL).

local k = tonumber(ARGV[7])
if k == nil or k < 1 or k > 64 or k ~= math.floor(k) then
  return bucket_refuse('take', 'k', ARGV[7])
end
local outflow_ttl = tonumber(ARGV[13])
if outflow_ttl == nil or outflow_ttl < 0 or outflow_ttl > 2147483647 or outflow_ttl ~= math.floor(outflow_ttl) then
  return bucket_refuse('take', 'outflow ttl (ARGV[13])', ARGV[13])
end
local b, ahead = nil, 0
if tonumber(ARGV[9]) ~= 0 then
  local rate = bucket_num(ARGV[9], 1000, 0, true, false)
  if not rate then return bucket_refuse('take', 'rate (ARGV[9])', ARGV[9]) end
  local capacity = bucket_num(ARGV[10], 1000000, 0, true, false)
  if not capacity then return bucket_refuse('take', 'capacity (ARGV[10])', ARGV[10]) end
  local margin = bucket_num(ARGV[11], 1, 0, false, true)
  if not margin or margin >= 2147483648 then return bucket_refuse('take', 'margin (ARGV[11])', ARGV[11]) end
  ahead = bucket_num(ARGV[12], 1, 0, false, true)
  if not ahead or ahead > 10000000 then return bucket_refuse('take', 'ahead (ARGV[12])', ARGV[12]) end
  local err
  b, err = bucket_open(KEYS[7], KEYS[8], rate, capacity, 0, margin, 'take') -- 0: Redis TIME
  if not b then return err end
  -- At most as many jobs as turns of cost 1 fall due within ahead.
  local fits = math.floor((b.cap_micro + ahead * b.rate - b.water) / 1000000)
  if fits < k then k = math.max(fits, 1) end
end
local now, now_us
if b then
  now_us = b.now
else
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
now = math.floor(now_us / 1000)
local ttl, state_ttl = ARGV[4], ARGV[8]
local deadline = now + tonumber(ARGV[2])

local function gate_reply(n, wait)
  if not b then return {now_us, -1, n, 0, 0, 0} end
  return {now_us, -1, n, wait, b.water, math.floor(b.rate * 1000)}
end

-- No turn free within ahead even for a job of cost 1: nothing is popped.
if b and b.capacity >= 1 and b.water + 1000000 > b.cap_micro and bucket_wait(b, 1000000) > ahead then
  if b.heal then bucket_store(b, b.water) end
  return gate_reply(0, bucket_wait(b, 1000000))
end

local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
if #due > 0 then
  for i = #due, 1, -1 do
    redis.call('LPUSH', KEYS[1], due[i])
  end
  redis.call('ZREM', KEYS[4], unpack(due))
  redis.call('PEXPIRE', KEYS[1], ttl)
end

local envs = redis.call('LPOP', KEYS[1], k)
if not envs then
  if b and b.heal then bucket_store(b, b.water) end
  local out = gate_reply(0, 0)
  local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  if #first > 0 then out[2] = tonumber(first[2]) end
  return out
end

-- turn decides a plain job's passage through the bucket b: 'go' with the
-- delay before its send in µs (its cost added), 'wait' with the wait in µs
-- (nothing written), or 'unstarted' (no recorded cost, or more than the
-- capacity: the drainer's bucket ask handles it).
local function turn(cost)
  if not b then return 'go', 0 end
  cost = tonumber(cost)
  if cost == nil or cost < 1 or cost ~= math.floor(cost) then return 'unstarted', 0 end
  local pass, us = bucket_pass(b, cost, ahead)
  if pass == 'go' then bucket_add(b, cost) end
  return pass, us
end

-- put_back returns envs[i..] to the head of the queue in their order (the
-- LPOP of the last job deleted the list: the LPUSH makes it anew).
local function put_back(i)
  local back = {}
  for j = #envs, i, -1 do back[#back + 1] = envs[j] end
  redis.call('LPUSH', KEYS[1], unpack(back))
  redis.call('PEXPIRE', KEYS[1], ttl)
end

local out = gate_reply(#envs, 0)
local leases, leased, starts, counts = {}, {}, {}, {}
local top_seq = nil
local prefix = ARGV[6]
local in_flight_index = nil
-- The started jobs leave their index (queued, retrying) together: one ZREM
-- per index after the loop (batch_flush of job_state_final.lua).
local left = batch_new()
for i, env in ipairs(envs) do
  local id = envelope_id(env)
  local member = id .. '|' .. ARGV[3] .. '.' .. i
  local cancelled, beat, done, attempt, enq = 0, 0, 0, 0, 0
  local pass, wait = 'unstarted', 0
  local sk, f, state
  if id ~= '?' then
    sk = prefix .. id
    -- pcall: HMGET fails (WRONGTYPE) only on the older string marker.
    f = redis.pcall('HMGET', sk, 'state', 'beat_at', 'enqueued_at', 'attempt', 'seq', 'heartbeat_ms', 'cost')
    if f['err'] then
      f = nil
      if redis.call('GET', sk) == 'cancelled' then cancelled = 1 end
    else
      state = f[1]
      beat = tonumber(f[2]) or tonumber(f[3]) or 0
      if state == 'cancelled' then cancelled = 1 end
      if state == 'done' then done = tonumber(f[3]) or 0 end
      local plain = (state == 'queued' or state == 'retrying' or state == 'in_flight')
        and f[3] and not f[6] and not string.find(env, '"deadline":', 1, true)
      if plain then pass, wait = turn(f[7]) end
    end
  end
  if b and i > 1 and pass ~= 'go' then
    -- Turns go in queue order: this job and those after it wait for the
    -- next call.
    put_back(i)
    break
  end
  if pass == 'wait' then
    -- The first job's turn is not free yet: back to the head, nothing leased.
    put_back(1)
    if b.heal then bucket_store(b, b.water) end
    return gate_reply(0, wait)
  end
  local delay = 0
  if pass == 'go' then
    delay = wait
    enq = tonumber(f[3]) or 0
    attempt = (tonumber(f[4]) or 0) + 1
    if state ~= 'in_flight' and JOB_LISTED[state] then
      batch_push(left.rem, left.rem_order, job_index(sk, state), id)
    end
    redis.call('HSET', sk, 'state', 'in_flight', 'attempt', attempt, 'updated_at', now)
    redis.call('PEXPIRE', sk, state_ttl)
    in_flight_index = in_flight_index or job_index(sk, 'in_flight')
    starts[#starts + 1] = now
    starts[#starts + 1] = id
    -- Its units, in the second of its send (jobs come in send order).
    -- A cost that is no whole number in [1, 10^12] counts 1: display only,
    -- and never a reason for HINCRBY to fail the take.
    local sec, units = math.floor((now + math.floor(delay / 1000)) / 1000), tonumber(f[7]) or 1
    if not (units >= 1 and units <= 1e12) then units = 1 end
    units = math.floor(units)
    if counts[#counts - 1] == sec then
      counts[#counts] = counts[#counts] + units
    else
      counts[#counts + 1], counts[#counts + 2] = sec, units
    end
    local seq = tonumber(f[5])
    if seq and (top_seq == nil or seq > top_seq) then top_seq = seq end
  end
  leases[#leases + 1] = deadline
  leases[#leases + 1] = member
  leased[#leased + 1] = member
  leased[#leased + 1] = env
  local o = #out
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = member, env, cancelled, beat
  out[o + 5], out[o + 6], out[o + 7], out[o + 8] = done, attempt, enq, delay
  if b and pass ~= 'go' then
    -- A first job leased unstarted asks the bucket itself: it comes alone.
    if i < #envs then put_back(i + 1) end
    break
  end
end
out[3] = #leased / 2
if b then
  if #starts > 0 or b.heal then bucket_store(b, b.water) end
  out[5] = b.water -- the level after the call (the turns taken included)
  if #starts > 0 and b.water + 1000000 > b.cap_micro then
    out[4] = bucket_wait(b, 1000000) -- the next turn, after the ones taken
  end
end

batch_flush(left)
redis.call('ZADD', KEYS[2], unpack(leases))
redis.call('HSET', KEYS[3], unpack(leased))
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
if #starts > 0 then
  redis.call('ZADD', in_flight_index, unpack(starts))
  redis.call('PEXPIRE', in_flight_index, JOB_INDEX_TTL)
  if top_seq then raise_seq(KEYS[5], top_seq, state_ttl) end
  if outflow_ttl > 0 then outflow_count(KEYS[6], counts, outflow_ttl, now) end
end
return out
