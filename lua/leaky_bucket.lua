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
-- now not an integer in [0, 2^53), margin not an integer in [0, 2^31), a
-- stored water not an integer in [0, 2^53) or a stored ts not one in
-- (0, 2^53). A cost whose micro-units reach 2^53 is above every capacity
-- and gets the "never" answer. Every write of the water hash is followed by
-- a PEXPIRE of an integer TTL in [1, MAX_TTL_MS] ms, so the key never lacks
-- a TTL.
--
-- KEYS[1]  water hash {water, ts, eff, eff_ts, eff_inc} (keys.Water): water
--          in micro-units, ts in unix µs; eff (units/s) set at eff_ts (µs),
--          recovering by eff_inc units/s every second
-- KEYS[2]  override hash (keys.Override): optional fields outflow_rate and
--          outflow_capacity (units/s, units) replace ARGV[1] and ARGV[2];
--          when present they must pass the same checks
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
-- number; for a stored one the argument names KEYS[1], and deleting that
-- key (an empty bucket) is the remedy.

local SAFE = 9007199254740992 -- 2^53
local MAX_WAIT_US = 3600000000 -- one hour; the caller asks again after it
local MAX_TTL_MS = 2592000000 -- 30 days

local function refuse(what, v, hint)
  return redis.error_reply('leaky_bucket: ' .. what .. ' ' .. string.sub(tostring(v), 1, 40) .. ' is out of range' .. (hint or ''))
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

local ov = redis.call('HMGET', KEYS[2], 'outflow_rate', 'outflow_capacity')
if ov[1] then
  rate = num(ov[1], 1000, 0, true, false)
  if not rate then return refuse('override outflow_rate', ov[1]) end
end
if ov[2] then
  capacity = num(ov[2], 1000000, 0, true, false)
  if not capacity then return refuse('override outflow_capacity', ov[2]) end
end

if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local st = redis.call('HMGET', KEYS[1], 'water', 'ts', 'eff', 'eff_ts', 'eff_inc')
local water, ts = 0, now
if st[1] then
  water = num(st[1], 1, 0, false, true)
  if not water then return refuse('stored water of ' .. KEYS[1], st[1], '; DEL the key to empty the bucket') end
end
if st[2] then
  ts = num(st[2], 1, 0, true, true)
  if not ts then return refuse('stored ts of ' .. KEYS[1], st[2], '; DEL the key to empty the bucket') end
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

local cap_micro = math.floor(capacity * 1000000)
local rate_milli = math.floor(rate * 1000)
if cost > capacity then
  return {-1, 0, water, rate_milli, cap_micro}
end
local cost_micro = cost * 1000000

if water + cost_micro <= cap_micro then
  water = water + cost_micro
  redis.call('HSET', KEYS[1], 'water', string.format('%d', water), 'ts', string.format('%d', now))
  local ttl = math.ceil(water / rate / 1000) + margin
  if not (ttl <= MAX_TTL_MS) then ttl = MAX_TTL_MS end
  if not (ttl >= 1) then ttl = 1 end
  redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl))
  return {1, 0, water, rate_milli, cap_micro}
end
local wait = math.ceil((water + cost_micro - cap_micro) / rate)
if not (wait <= MAX_WAIT_US) then wait = MAX_WAIT_US end
if not (wait >= 1) then wait = 1 end
return {0, wait, water, rate_milli, cap_micro}
