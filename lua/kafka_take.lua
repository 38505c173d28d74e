-- kafka_take.lua: read the cancel marker, last beat and done copy of n jobs
-- a Kafka consumer took from its FIFOs, and start the delivery of each one
-- it may start, in one call (Kafka queue backend's Take; docs/perf.md 2.2,
-- levers L1 + L3 for a tenant whose outflow has no gate in Redis).
-- lua.Include puts job_state_final.lua (job_id, job_index, JOB_LISTED) first.
--
-- Every job is read as job_cancelled.lua reads it: cancelled (a hash whose
-- state is cancelled, or the older string marker "cancelled"), its last
-- beat (beat_at, else enqueued_at) and, when its state is done, its
-- recorded enqueued_at. A job the caller marks startable (ARGV start "1":
-- decoded, no deadline, no heartbeat, not a second copy held in memory) is
-- then started unless it is cancelled or this very job (the same
-- enqueued_at) is done, exactly as job_state_dispatch.lua starts it: state
-- in_flight with attempt = recorded + 1 when the recorded attempt is of this
-- life (the same enqueued_at, or none recorded yet unless the job is dead),
-- at least the least attempt given; updated_at now; the state hash created
-- when missing (the post-ack write may come later) and its TTL refreshed;
-- its id moved from the index of the state it leaves (not dead's) to the
-- in_flight index; the dispatched sequence raised to the highest seq
-- started; the delivery in the deliveries in progress until now + lease. An
-- older string marker that is not a cancel is not written, and its delivery
-- starts all the same (as job_state_dispatch.lua). The set writes are one
-- ZADD of the in_flight index, one ZADD of the deliveries and at most one
-- SET of the sequence per call.
--
-- KEYS[1]    the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[2]    the tenant's deliveries in progress (keys.Delivering)
-- KEYS[2+i]  job i's state hash (keys.JobState), i = 1..n, n in [1, 64]
-- ARGV[1]    now, unix ms; "0" reads Redis TIME
-- ARGV[2]    lease, ms
-- ARGV[3]    PEXPIRE of the states and the sequence, ms (keys.JobStateTTL)
-- ARGV[4]    PEXPIRE of the deliveries set, ms (keys.QueueTTL)
-- ARGV[5+4(i-1)] .. ARGV[8+4(i-1)], per job i: its member in KEYS[2]
--            (queue.Claimed.Token); "1" to start it, "0" to read only; the
--            least attempt (the envelope's attempts + 1); the envelope's
--            enqueued_at, unix ms ("0": not known, no done check)
--
-- Returns {now_ms, then per job cancelled (0|1), beat_ms, done_ms,
-- attempt}: beat_ms 0 when none is recorded; done_ms the recorded
-- enqueued_at when the state is done, else 0; attempt the delivery's number
-- (>= 1) when it was started here, 0 when not.
-- Errors: "kafka_take: <n> keys and <m> arguments do not match".

local n = #KEYS - 2
if n < 1 or n > 64 or #ARGV ~= 4 + 4 * n then
  return redis.error_reply('kafka_take: ' .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments do not match')
end
local now = tonumber(ARGV[1])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local deadline = now + tonumber(ARGV[2])
local ttl = ARGV[3]

local out = {now}
local starts, delivering = {}, {}
local top_seq, in_flight_index = nil, nil
for i = 1, n do
  local sk, a = KEYS[2 + i], 4 + 4 * (i - 1)
  local start, floor, enq = ARGV[a + 2] == '1', tonumber(ARGV[a + 3]) or 1, ARGV[a + 4]
  local cancelled, beat, done, attempt = 0, 0, 0, 0
  -- pcall: HMGET fails (WRONGTYPE) only on the older string marker.
  local f = redis.pcall('HMGET', sk, 'state', 'beat_at', 'enqueued_at', 'seq', 'attempt')
  if f['err'] then
    if redis.pcall('GET', sk) == 'cancelled' then
      cancelled = 1
    elseif start then
      attempt = floor
    end
  else
    local state = f[1]
    beat = tonumber(f[2]) or tonumber(f[3]) or 0
    if state == 'cancelled' then cancelled = 1 end
    if state == 'done' then done = tonumber(f[3]) or 0 end
    local copy = state == 'done' and enq ~= '0' and f[3] == enq
    if start and cancelled == 0 and not copy then
      attempt = floor
      if enq == '0' or f[3] == enq or (not f[3] and state ~= 'dead') then
        attempt = math.max((tonumber(f[5]) or 0) + 1, floor)
      end
      local id = job_id(sk)
      if id then
        if type(state) == 'string' and state ~= 'in_flight' and state ~= 'dead' and JOB_LISTED[state] then
          redis.call('ZREM', job_index(sk, state), id)
        end
        in_flight_index = in_flight_index or job_index(sk, 'in_flight')
        starts[#starts + 1] = now
        starts[#starts + 1] = id
      end
      redis.call('HSET', sk, 'state', 'in_flight', 'attempt', attempt, 'updated_at', now)
      redis.call('PEXPIRE', sk, ttl)
      local seq = tonumber(f[4])
      if seq and (top_seq == nil or seq > top_seq) then top_seq = seq end
    end
  end
  if attempt > 0 then
    delivering[#delivering + 1] = deadline
    delivering[#delivering + 1] = ARGV[a + 1]
  end
  local o = #out
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = cancelled, beat, done, attempt
end

if #starts > 0 then
  redis.call('ZADD', in_flight_index, unpack(starts))
  redis.call('PEXPIRE', in_flight_index, JOB_INDEX_TTL)
end
if top_seq and top_seq > (tonumber(redis.call('GET', KEYS[1])) or 0) then
  redis.call('SET', KEYS[1], top_seq, 'PX', ttl)
end
if #delivering > 0 then
  redis.call('ZADD', KEYS[2], unpack(delivering))
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
return out
