-- kafka_take.lua: read the cancel marker, last beat and done copy of n jobs
-- a Kafka consumer took from its FIFOs, and start the delivery of each one
-- it may start, in one call (Kafka queue backend's Take and TakeTurn;
-- docs/perf.md 2.2, levers L1 + L3, and with a rate L10). lua.Include puts
-- job_state_final.lua (job_id, job_index, JOB_LISTED, and a job's life:
-- life_copy, life_attempts, start_write) and bucket_level.lua first.
--
-- Every job is read as job_cancelled.lua reads it: cancelled (a hash whose
-- state is cancelled, or the older string marker "cancelled"), its last
-- beat (beat_at, else enqueued_at) and whether it is a copy not to deliver
-- (life_copy): this very job, the same enqueued_at as recorded (the
-- producer's, else the start_enqueued_at a drainer's start wrote before the
-- producer's post-ack write landed), is done or dead, or its delivery is
-- under way from a copy in another partition (in_flight or retrying,
-- started from another partition). A job the caller marks startable (ARGV
-- start "1": decoded, no deadline, no heartbeat, not a second copy held in
-- memory) is then started unless it is cancelled or such a copy, exactly as
-- job_state_dispatch.lua starts it: state in_flight with attempt = recorded + 1 when the recorded attempt is of this
-- life (the same enqueued_at, recorded or kept as start_enqueued_at, or
-- neither recorded yet unless the job is dead),
-- at least the least attempt given; updated_at now; the state hash created
-- when missing (the post-ack write may come later) and its TTL refreshed;
-- when the hash holds no enqueued_at (that write has not landed), the
-- envelope's goes to start_enqueued_at, so a later copy of this job finds
-- it done even before the write lands; the record's partition goes to
-- start_part;
-- its id moved from the index of the state it leaves (not dead's) to the
-- in_flight index; the dispatched sequence raised to the highest seq
-- started; the delivery in the deliveries in progress until now + lease. An
-- older string marker that is not a cancel is not written, and its delivery
-- starts all the same (as job_state_dispatch.lua). The set writes are one
-- ZADD of the in_flight index, one ZADD of the deliveries and at most one
-- SET of the sequence per call.
--
-- With a rate (ARGV[5] > 0) each job passes through the tenant's shared
-- outflow bucket as leaky_bucket.lua and take.lua pass one (KEYS[3],
-- KEYS[4]: the same rules, override and adaptive rate; bucket_level.lua),
-- for the cost ARGV[9] (the envelopes'; a call of several jobs has them all
-- startable and of that one cost), before its state is read. When the
-- first job's turn is due later than ARGV[8] µs the call reads nothing more
-- and writes nothing (but a level the bucket heals): the reply's wait_us is
-- the wait, taken is 0, every job's fields are 0 and the consumer puts the
-- jobs back. Else jobs are read as above, in order, each whose turn is free
-- now or due within ARGV[8] µs: when it starts, its cost is added to the
-- water (above the capacity by what leaks in that wait, so every other ask
-- sees the turn spent) and its delay_us tells the consumer to send it that
-- much later. The first job whose turn falls later ends the call: taken
-- counts the jobs before it, whose fields are given; the rest are neither
-- read nor written (fields 0), and the consumer puts them back. A job
-- found cancelled or a done copy takes no turn; so does one whose cost
-- exceeds the capacity (it can never pass), which comes unstarted, as does
-- a job the caller does not mark startable (alone in its call; the bucket
-- is then not read): the drainer passes such a job through the bucket
-- itself. The water is written once per call.
--
-- KEYS[1]    the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[2]    the tenant's deliveries in progress (keys.Delivering)
-- KEYS[3]    with a rate: the water hash (keys.Water)
-- KEYS[4]    with a rate: the override hash (keys.Override)
-- KEYS[g+i]  job i's state hash (keys.JobState), i = 1..n, n in [1, 64]; g
--            is 2, with a rate 4
-- ARGV[1]    now, unix ms; "0" reads Redis TIME
-- ARGV[2]    lease, ms
-- ARGV[3]    PEXPIRE of the states and the sequence, ms (keys.JobStateTTL)
-- ARGV[4]    PEXPIRE of the deliveries set, ms (keys.QueueTTL)
-- ARGV[5]    outflow rate, units/s; 0: no bucket (ARGV[6..9] unused)
-- ARGV[6]    outflow capacity, units (> 0 with a rate)
-- ARGV[7]    TTL margin of the water hash, ms (keys.WaterMargin)
-- ARGV[8]    a turn due within this many µs is granted now, for a send that
--            much later (0: only a turn free now), at most 10 s
-- ARGV[9]    with a rate: the job's cost, units (an integer >= 1)
-- ARGV[10+5(i-1)] .. ARGV[14+5(i-1)], per job i: its member in KEYS[2]
--            (queue.Claimed.Token); "1" to start it, "0" to read only; the
--            least attempt (the envelope's attempts + 1); the envelope's
--            enqueued_at, unix ms ("0": not known, no done check); the
--            partition its record was read from (queue.Claimed.Source)
--
-- Returns {now_ms, wait_us, taken, water_micro, rate_milli, now_us, then
-- per job cancelled (0|1), beat_ms, done_ms, attempt, delay_us}: now_us
-- is the bucket's clock in µs (the call's, or the bucket's last write when
-- the call is behind it; the call's without a bucket): a started job's
-- turn falls at now_us + delay_us on it, which the drainer maps to its own
-- clock; wait_us >= 1 when
-- the first job's turn was not free (nothing is started, taken 0), else 0;
-- taken the jobs read (all n without a rate); water_micro and rate_milli
-- the bucket's level after the call and the rate used, as take.lua returns
-- them, 0 when the bucket was not read (no rate, or no job to pass);
-- beat_ms 0 when none is recorded; done_ms the envelope's enqueued_at when
-- the job is such a copy, else 0; attempt the delivery's number (>= 1) when it
-- was started here, 0 when not; delay_us the wait before the send of a job
-- started with a turn granted ahead, else 0.
-- Errors: "kafka_take: <n> keys and <m> arguments do not match" (also for
-- a gated call of several jobs not all marked startable);
-- "kafka_take: <argument> <value> is out of range", as take.lua names a
-- refused rate, capacity, margin, ahead or override.

local gated = tonumber(ARGV[5]) ~= 0
local g = 2
if gated then g = 4 end
local n = #KEYS - g
local function mismatch()
  return redis.error_reply('kafka_take: ' .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments do not match')
end
if n < 1 or n > 64 or #ARGV ~= 9 + 5 * n then return mismatch() end
if gated and n > 1 then
  for i = 1, n do
    if ARGV[9 + 5 * (i - 1) + 2] ~= '1' then return mismatch() end
  end
end
local rate, capacity, margin, ahead, cost
if gated then
  rate = bucket_num(ARGV[5], 1000, 0, true, false)
  if not rate then return bucket_refuse('kafka_take', 'rate (ARGV[5])', ARGV[5]) end
  capacity = bucket_num(ARGV[6], 1000000, 0, true, false)
  if not capacity then return bucket_refuse('kafka_take', 'capacity (ARGV[6])', ARGV[6]) end
  margin = bucket_num(ARGV[7], 1, 0, false, true)
  if not margin or margin >= 2147483648 then return bucket_refuse('kafka_take', 'margin (ARGV[7])', ARGV[7]) end
  ahead = bucket_num(ARGV[8], 1, 0, false, true)
  if not ahead or ahead > 10000000 then return bucket_refuse('kafka_take', 'ahead (ARGV[8])', ARGV[8]) end
  cost = tonumber(ARGV[9])
  if cost == nil or not (cost >= 1) or cost == math.huge or cost ~= math.floor(cost) then
    return bucket_refuse('kafka_take', 'cost (ARGV[9])', ARGV[9])
  end
end
local now, now_us, now_clock = tonumber(ARGV[1]), 0, false
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  now = math.floor(now_us / 1000)
  now_clock = true
else
  now_us = now * 1000
end
local deadline = now + tonumber(ARGV[2])
local ttl = ARGV[3]

-- The bucket, read with a rate for a job the caller would start (nil: not
-- read), whether the call spent turns, and the head of the reply.
local b, spent = nil, false
local out = {now, 0, n, 0, 0, now_us}
local function head()
  if b then out[4], out[5], out[6] = b.water, math.floor(b.rate * 1000), b.now end
  return out
end

-- turn decides the passage through the bucket of a job that would start,
-- writing nothing: 'go' with the delay before its send in µs (0: now),
-- 'wait' with the wait in µs, 'unstarted' (its cost exceeds the capacity),
-- or 'error' with the error reply of a refused override (bucket_pass of
-- bucket_level.lua, for a cost known before the call; the bucket is opened
-- at the first job); spend adds the cost to the level (written once, at the
-- end).
local function turn()
  if not b then
    local err
    b, err = bucket_open(KEYS[3], KEYS[4], rate, capacity, now_us, margin, 'kafka_take', now_clock)
    if not b then return 'error', err end
  end
  return bucket_pass(b, cost, ahead)
end

local function spend()
  bucket_add(b, cost)
  spent = true
end

-- With a rate the bucket is read before the job: when its turn is not free
-- nothing else is read, and nothing is written but a healed level.
local pass, pass_us = 'go', 0
if gated and ARGV[11] == '1' then
  pass, pass_us = turn()
  if pass == 'error' then return pass_us end
  if pass == 'wait' then
    if b.heal then bucket_store(b, b.water) end
    local r = head()
    r[2], r[3] = pass_us, 0
    for _ = 1, 5 * n do r[#r + 1] = 0 end
    return r
  end
end

local starts, delivering = {}, {}
-- The started jobs leave their index (queued, retrying) together: one ZREM
-- per index after the loop (batch_flush of job_state_final.lua).
local left = batch_new()
local top_seq, in_flight_index = nil, nil
local taken = n
for i = 1, n do
  local delay = 0
  if gated and i > 1 then
    -- Every job of a gated call of several is startable, of one cost.
    pass, pass_us = turn()
    if pass ~= 'go' then
      taken = i - 1
      break
    end
  end
  local sk, a = KEYS[g + i], 9 + 5 * (i - 1)
  local start, floor, enq, part = ARGV[a + 2] == '1', tonumber(ARGV[a + 3]) or 1, ARGV[a + 4], ARGV[a + 5]
  local cancelled, beat, done, attempt = 0, 0, 0, 0
  -- pcall: HMGET fails (WRONGTYPE) only on the older string marker.
  local f = redis.pcall('HMGET', sk, 'state', 'beat_at', 'enqueued_at', 'seq', 'attempt', 'start_enqueued_at', 'start_part')
  local marker = f['err'] ~= nil
  local state = nil
  if marker then
    if redis.pcall('GET', sk) == 'cancelled' then cancelled = 1 end
  else
    state = f[1]
    beat = tonumber(f[2]) or tonumber(f[3]) or 0
    if state == 'cancelled' then cancelled = 1 end
  end
  -- A copy (done, dead, or under way from another partition) is reported
  -- with the envelope's enqueued_at, which the consumer matches.
  local copy = not marker and life_copy(state, f[3], f[6], f[7], part, enq)
  if copy then done = tonumber(enq) or 0 end
  if start and cancelled == 0 and not copy and pass == 'go' then
    attempt = floor
    if gated then
      spend()
      delay = pass_us
    end
  end
  if attempt > 0 and not marker then
    if life_attempts(state, f[3], f[6], enq) then
      attempt = math.max((tonumber(f[5]) or 0) + 1, floor)
    end
    local id = job_id(sk)
    if id then
      if type(state) == 'string' and state ~= 'in_flight' and state ~= 'dead' and JOB_LISTED[state] then
        batch_push(left.rem, left.rem_order, job_index(sk, state), id)
      end
      in_flight_index = in_flight_index or job_index(sk, 'in_flight')
      starts[#starts + 1] = now
      starts[#starts + 1] = id
    end
    start_write(sk, attempt, now, f[3], enq, part)
    redis.call('PEXPIRE', sk, ttl)
    local seq = tonumber(f[4])
    if seq and (top_seq == nil or seq > top_seq) then top_seq = seq end
  end
  if attempt > 0 then
    delivering[#delivering + 1] = deadline
    delivering[#delivering + 1] = ARGV[a + 1]
  end
  local o = #out
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = cancelled, beat, done, attempt, delay
end
for _ = taken + 1, n do
  for _ = 1, 5 do out[#out + 1] = 0 end
end
out[3] = taken
if b and (spent or b.heal) then bucket_store(b, b.water) end

batch_flush(left)
if #starts > 0 then
  redis.call('ZADD', in_flight_index, unpack(starts))
  redis.call('PEXPIRE', in_flight_index, JOB_INDEX_TTL)
end
if top_seq then raise_seq(KEYS[1], top_seq, ttl) end
if #delivering > 0 then
  redis.call('ZADD', KEYS[2], unpack(delivering))
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
return head()
