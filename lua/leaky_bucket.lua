-- leaky_bucket.lua: a tenant's shared outflow leaky bucket (water level).
--
-- The water level is kept in integer micro-units (1 unit = 1,000,000) so that
-- no reply or stored value depends on Lua float formatting or on Redis
-- truncating a Lua number to an integer.
--
--   leaked = (now - ts) * rate            (micro-units; rate in units/s, time in µs)
--   water  = max(0, water - leaked)
--   a job whose cost exceeds the capacity can never pass: "never", nothing written
--   allowed when water + cost <= capacity; then water = water + cost, ts = now
--   else wait = ceil((water + cost - capacity) / rate) µs, at most MAX_WAIT_US,
--   and nothing is written
--
-- rate is min(override rate or ARGV rate, adaptive rate) where the adaptive
-- rate, set by drain_adapt.lua after a downstream 429/503, climbs back
-- additively: eff + (now - eff_ts) * eff_inc.
--
-- Numbers the script cannot represent exactly are refused with an error
-- reply naming the argument, before anything is written: rate not a finite
-- number with 0 < rate × 1000 < 2^53, capacity not one with
-- 0 < capacity × 10^6 < 2^53 (ARGV or override), cost not an integer >= 1,
-- now not an integer in [0, 2^53), margin not an integer in [0, 2^31). A
-- cost whose micro-units reach 2^53 is above every capacity and gets the
-- "never" answer. A stored water not an integer in [0, 2^53) or a stored ts
-- not one in (0, 2^53) (only an older version wrote such) is healed: a full
-- bucket at now, written back. Every write of the water hash is followed by
-- a PEXPIRE of an integer TTL in [1, MAX_TTL_MS] ms, so the key never lacks
-- a TTL.
--
-- KEYS[1]  water hash {water, ts, eff, eff_ts, eff_inc} (keys.Water): water
--          in micro-units, ts in unix µs; eff (units/s) set at eff_ts (µs),
--          recovering by eff_inc units/s every second
-- KEYS[2]  override hash (keys.Override): optional fields outflow_rate and
--          outflow_capacity (units/s, units) replace ARGV[1] and ARGV[2]
--          when they are positive numbers (then they must pass the same
--          checks); anything else (absent, 0, negative, NaN, not a number)
--          is no override
-- ARGV[1]  configured rate, units per second (> 0)
-- ARGV[2]  configured capacity, units (> 0)
-- ARGV[3]  cost, integer units (>= 1)
-- ARGV[4]  now, unix µs; "0" reads Redis TIME
-- ARGV[5]  TTL margin in ms added to the time the bucket takes to empty
--
-- Returns {allowed, wait_us, water_micro, rate_milli, capacity_micro}:
--   allowed 1 (the job goes; its cost was added), 0 (wait wait_us, >= 1,
--   then ask again) or -1 (never: cost > capacity; wait_us 0, nothing
--   written). water_micro is the level after the call, rate_milli the rate
--   used × 1000. Every value is an integer below 2^53.
-- Errors: "leaky_bucket: <argument> <value> is out of range" for a refused
-- number.

local SAFE = 9007199254740992 -- 2^53
local MAX_WAIT_US = 3600000000 -- one hour; the caller asks again after it
local MAX_TTL_MS = 2592000000 -- 30 days

local function refuse(what, v)
  return redis.error_reply('leaky_bucket: ' .. what .. ' ' .. string.sub(tostring(v), 1, 40) .. ' is out of range')
end

-- num returns v as a number in (lo, SAFE / scale) (lo excluded when open,
-- else included), integer when int; nil when it is not one.
local function num(v, scale, lo, open, int)
  local x = tonumber(v)
  if x == nil or x ~= x or x * scale >= SAFE then return nil end
  if open then
    if not (x > lo) then return nil end
  elseif not (x >= lo) then
    return nil
  end
  if int and x ~= math.floor(x) then return nil end
  return x
end

local rate = num(ARGV[1], 1000, 0, true, false)
if not rate then return refuse('rate (ARGV[1])', ARGV[1]) end
local capacity = num(ARGV[2], 1000000, 0, true, false)
if not capacity then return refuse('capacity (ARGV[2])', ARGV[2]) end
local cost = tonumber(ARGV[3])
if cost == nil or not (cost >= 1) or cost == math.huge or cost ~= math.floor(cost) then
  return refuse('cost (ARGV[3])', ARGV[3])
end
local now = num(ARGV[4], 1, 0, false, true)
if not now then return refuse('now (ARGV[4])', ARGV[4]) end
local margin = num(ARGV[5], 1, 0, false, true)
if not margin or margin >= 2147483648 then return refuse('margin (ARGV[5])', ARGV[5]) end

-- An override that is not a positive number (absent, "0", negative, NaN,
-- not a number) is no override: the configured value applies, so a zero
-- never lifts the limit. A positive one must be representable.
local ov = redis.call('HMGET', KEYS[2], 'outflow_rate', 'outflow_capacity')
local ovr, ovc = tonumber(ov[1]), tonumber(ov[2])
if ovr and ovr > 0 then
  rate = num(ovr, 1000, 0, true, false)
  if not rate then return refuse('override outflow_rate', ov[1]) end
end
if ovc and ovc > 0 then
  capacity = num(ovc, 1000000, 0, true, false)
  if not capacity then return refuse('override outflow_capacity', ov[2]) end
end

if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local cap_micro = math.floor(capacity * 1000000)

-- A stored level this script cannot have written (left by an older
-- version: a water of 9.2e24, a key without a TTL) is healed, never a
-- reason to fail every later call: a corrupt water reads as a full bucket
-- and a corrupt ts as now (no leak is invented, so no burst), and the
-- healed state is written back with a TTL whatever the answer.
local st = redis.call('HMGET', KEYS[1], 'water', 'ts', 'eff', 'eff_ts', 'eff_inc')
local water, ts, heal = 0, now, false
if st[1] then
  water = num(st[1], 1, 0, false, true)
  if not water then water, ts, heal = cap_micro, now, true end
end
if st[2] and not heal then
  ts = num(st[2], 1, 0, true, true)
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

-- store writes the level at now with its TTL: the time the bucket takes to
-- empty plus margin, an integer in [1, MAX_TTL_MS] ms.
local function store(level)
  redis.call('HSET', KEYS[1], 'water', string.format('%d', level), 'ts', string.format('%d', now))
  local ttl = math.ceil(level / rate / 1000) + margin
  if not (ttl <= MAX_TTL_MS) then ttl = MAX_TTL_MS end
  if not (ttl >= 1) then ttl = 1 end
  redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl))
end

local rate_milli = math.floor(rate * 1000)
if cost > capacity then
  if heal then store(water) end
  return {-1, 0, water, rate_milli, cap_micro}
end
local cost_micro = cost * 1000000

if water + cost_micro <= cap_micro then
  water = water + cost_micro
  store(water)
  return {1, 0, water, rate_milli, cap_micro}
end
if heal then store(water) end
local wait = math.ceil((water + cost_micro - cap_micro) / rate)
if not (wait <= MAX_WAIT_US) then wait = MAX_WAIT_US end
if not (wait >= 1) then wait = 1 end
return {0, wait, water, rate_milli, cap_micro}
