-- leaky_bucket.lua: a tenant's shared outflow leaky bucket (water level).
--
-- The water level is kept in integer micro-units (1 unit = 1,000,000) so that
-- no reply or stored value depends on Lua float formatting or on Redis
-- truncating a Lua number to an integer.
--
--   leaked = (now - ts) * rate            (micro-units; rate in units/s, time in µs)
--   water  = max(0, water - leaked)
--   need   = min(cost, capacity)          (a job larger than the bucket goes when it is empty)
--   allowed when water + need <= capacity; then water = water + cost, ts = now
--   else wait = ceil((water + need - capacity) / rate) µs and nothing is written
--
-- rate is min(override rate or ARGV rate, adaptive rate) where the adaptive
-- rate, set by drain_adapt.lua after a downstream 429/503, climbs back
-- additively: eff + (now - eff_ts) * eff_inc.
--
-- KEYS[1]  water hash {water, ts, eff, eff_ts, eff_inc} (keys.Water): water
--          in micro-units, ts in unix µs; eff (units/s) set at eff_ts (µs),
--          recovering by eff_inc units/s every second
-- KEYS[2]  override hash (keys.Override): optional fields outflow_rate and
--          outflow_capacity (units/s, units) replace ARGV[1] and ARGV[2]
-- ARGV[1]  configured rate, units per second (> 0)
-- ARGV[2]  configured capacity, units (> 0)
-- ARGV[3]  cost, integer units (>= 1)
-- ARGV[4]  now, unix µs; "0" reads Redis TIME
-- ARGV[5]  TTL margin in ms added to the time the bucket takes to empty
--
-- Returns {allowed (1 or 0), wait_us, water_micro, rate_milli, capacity_micro}
--   water_micro is the level after the call, rate_milli the rate used × 1000.

local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local margin = tonumber(ARGV[5])

local ov = redis.call('HMGET', KEYS[2], 'outflow_rate', 'outflow_capacity')
local ovr = tonumber(ov[1])
if ovr and ovr > 0 then rate = ovr end
local ovc = tonumber(ov[2])
if ovc and ovc > 0 then capacity = ovc end

if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local st = redis.call('HMGET', KEYS[1], 'water', 'ts', 'eff', 'eff_ts', 'eff_inc')
local water = tonumber(st[1]) or 0
local ts = tonumber(st[2]) or now
local eff = tonumber(st[3])
if eff and eff > 0 then
  local since = now - (tonumber(st[4]) or now)
  if since < 0 then since = 0 end
  eff = eff + since / 1000000 * (tonumber(st[5]) or 0)
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
if water < 0 then water = 0 end

local cap_micro = math.floor(capacity * 1000000)
local cost_micro = cost * 1000000
local need = cost_micro
if need > cap_micro then need = cap_micro end

local rate_milli = math.floor(rate * 1000)
if water + need <= cap_micro then
  water = water + cost_micro
  redis.call('HSET', KEYS[1], 'water', water, 'ts', now)
  local ttl = math.ceil(water / rate / 1000) + margin
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, 0, water, rate_milli, cap_micro}
end
local wait = math.ceil((water + need - cap_micro) / rate)
return {0, wait, water, rate_milli, cap_micro}
