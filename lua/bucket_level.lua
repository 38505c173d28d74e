-- bucket_level.lua: the shared outflow bucket's level, a module of
-- leaky_bucket.lua (the authority on the bucket's rules, in its header) and
-- take.lua. Run on its own it only defines local functions and touches
-- nothing.
--
--   bucket_num(v, scale, lo, open, int)  v as a number in (lo, 2^53 / scale)
--     (lo excluded when open, else included), an integer when int; nil when
--     it is not one.
--   bucket_open(kw, ko, rate, capacity, now, margin, script, clock)  reads
--     the override
--     hash ko (a positive outflow_rate / outflow_capacity replaces rate /
--     capacity; one the scripts cannot represent is refused: nil and an
--     error reply naming it), Redis TIME when now is 0 (µs), and the water
--     hash kw, heals a level an older version left, applies the adaptive
--     rate and leaks the water up to now. Returns the bucket b: b.now (µs,
--     never before the stored ts), b.rate, b.capacity, b.cap_micro, b.water
--     (micro-units after the leak), b.heal (the stored state was healed and
--     must be written back), b.margin; writes nothing.
--   bucket_store(b, level)  writes level at b.now with its TTL: the time the
--     bucket takes to empty plus b.margin ms, an integer in [1, 30 d]. With
--     b.now from Redis TIME (now 0, or clock true) the TTL is set with
--     BUCKET_TTL_SLACK_MS more and the absolute expiry kept in the hash
--     ("exp", unix ms); a later store whose own TTL ends before that expiry
--     writes no PEXPIRE (one command fewer per turn of a busy tenant; the key
--     never expires earlier than one PEXPIRE per store would make it, and
--     lives at most the slack longer). A store at a caller's explicit clock
--     sets its TTL and "exp" 0, so no later store trusts an expiry it did not
--     set on Redis' clock (drain_adapt.lua only ever lengthens the TTL).
--   bucket_wait(b, cost_micro)  the wait in µs before cost_micro fits, in
--     [1, one hour].
--   bucket_pass(b, cost, ahead)  a job's passage (the take scripts' turn),
--     writing nothing: 'unstarted' when cost exceeds the capacity, 'wait'
--     and the wait in µs when it fits only later than ahead µs, else 'go'
--     and the delay before its send in µs (0: it fits now).
--   bucket_add(b, cost)  adds cost to the level b holds, writing nothing
--     (take.lua adds a call's turns and stores the level once).
--   bucket_spend(b, cost)  bucket_add, then stores the level.
--
-- KEYS  none of its own: the including script passes its keys.
-- ARGV  none of its own.

local BUCKET_SAFE = 9007199254740992 -- 2^53
local BUCKET_MAX_WAIT_US = 3600000000 -- one hour; the caller asks again after it
local BUCKET_MAX_TTL_MS = 2592000000 -- 30 days
local BUCKET_TTL_SLACK_MS = 10000 -- see bucket_store

local function bucket_num(v, scale, lo, open, int)
  local x = tonumber(v)
  if x == nil or x ~= x or x * scale >= BUCKET_SAFE then return nil end
  if open then
    if not (x > lo) then return nil end
  elseif not (x >= lo) then
    return nil
  end
  if int and x ~= math.floor(x) then return nil end
  return x
end

local function bucket_refuse(script, what, v)
  return redis.error_reply(script .. ': ' .. what .. ' ' .. string.sub(tostring(v), 1, 40) .. ' is out of range')
end

local function bucket_open(kw, ko, rate, capacity, now, margin, script, clock)
  -- An override that is not a positive number (absent, "0", negative, NaN,
  -- not a number) is no override: the configured value applies, so a zero
  -- never lifts the limit. A positive one must be representable.
  local ov = redis.call('HMGET', ko, 'outflow_rate', 'outflow_capacity')
  local ovr, ovc = tonumber(ov[1]), tonumber(ov[2])
  if ovr and ovr > 0 then
    rate = bucket_num(ovr, 1000, 0, true, false)
    if not rate then return nil, bucket_refuse(script, 'override outflow_rate', ov[1]) end
  end
  if ovc and ovc > 0 then
    capacity = bucket_num(ovc, 1000000, 0, true, false)
    if not capacity then return nil, bucket_refuse(script, 'override outflow_capacity', ov[2]) end
  end
  if now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    clock = true
  end
  local cap_micro = math.floor(capacity * 1000000)
  -- A stored level this script cannot have written (left by an older
  -- version: a water of 9.2e24, a key without a TTL) is healed, never a
  -- reason to fail every later call: a corrupt water reads as a full bucket
  -- and a corrupt ts as now (no leak is invented, so no burst), and the
  -- healed state is written back with a TTL whatever the answer.
  local st = redis.call('HMGET', kw, 'water', 'ts', 'eff', 'eff_ts', 'eff_inc', 'exp')
  local water, ts, heal = 0, now, false
  if st[1] then
    water = bucket_num(st[1], 1, 0, false, true)
    if not water then water, ts, heal = cap_micro, now, true end
  end
  if st[2] and not heal then
    ts = bucket_num(st[2], 1, 0, true, true)
    if not ts then ts, heal = now, true end
  end
  local eff = tonumber(st[3])
  if eff and eff > 0 then
    local since = now - (tonumber(st[4]) or now)
    if not (since > 0) then since = 0 end
    eff = eff + since / 1000000 * (tonumber(st[5]) or 0)
    -- An absurd eff (inf, NaN) fails the comparison and leaves rate alone;
    -- a tiny one only lowers it.
    if eff < rate then rate = eff end
  end
  local elapsed = now - ts
  if elapsed < 0 then
    -- A caller behind the last writer (skewed explicit clocks): no leak, and
    -- ts stays where it is so no time is leaked twice.
    elapsed = 0
    now = ts
  end
  water = water - math.floor(elapsed * rate)
  if not (water > 0) then water = 0 end
  return {now = now, rate = rate, capacity = capacity, cap_micro = cap_micro, water = water, heal = heal,
    margin = margin, kw = kw, clock = clock and not heal, exp = tonumber(st[6]) or 0}
end

local function bucket_store(b, level)
  local ttl = math.ceil(level / b.rate / 1000) + b.margin
  if not (ttl <= BUCKET_MAX_TTL_MS) then ttl = BUCKET_MAX_TTL_MS end
  if not (ttl >= 1) then ttl = 1 end
  local water, ts = string.format('%d', level), string.format('%d', b.now)
  if not b.clock then
    redis.call('HSET', b.kw, 'water', water, 'ts', ts, 'exp', '0')
    redis.call('PEXPIRE', b.kw, string.format('%d', ttl))
    return
  end
  local now_ms = math.floor(b.now / 1000)
  -- An exp past the longest TTL a store sets is not one this script wrote
  -- (hand-edited, corrupt): it is not trusted, and the TTL is set again.
  if now_ms + ttl <= b.exp and b.exp <= now_ms + BUCKET_MAX_TTL_MS then
    redis.call('HSET', b.kw, 'water', water, 'ts', ts)
    return
  end
  ttl = math.min(ttl + BUCKET_TTL_SLACK_MS, BUCKET_MAX_TTL_MS)
  b.exp = now_ms + ttl
  redis.call('HSET', b.kw, 'water', water, 'ts', ts, 'exp', string.format('%d', b.exp))
  redis.call('PEXPIRE', b.kw, string.format('%d', ttl))
end

local function bucket_wait(b, cost_micro)
  local wait = math.ceil((b.water + cost_micro - b.cap_micro) / b.rate)
  if not (wait <= BUCKET_MAX_WAIT_US) then wait = BUCKET_MAX_WAIT_US end
  if not (wait >= 1) then wait = 1 end
  return wait
end

local function bucket_pass(b, cost, ahead)
  if cost > b.capacity then return 'unstarted', 0 end
  local cost_micro = cost * 1000000
  if b.water + cost_micro <= b.cap_micro then return 'go', 0 end
  local wait = bucket_wait(b, cost_micro)
  if wait > ahead then return 'wait', wait end
  return 'go', wait
end

local function bucket_add(b, cost)
  b.water = b.water + cost * 1000000
end

local function bucket_spend(b, cost)
  bucket_add(b, cost)
  bucket_store(b, b.water)
end
