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
--   else wait = ceil((water + cost - capacity) / rate) µs, at most MAX_WAIT_US:
--   when wait <= ahead (ARGV[6]) the turn is granted now for a send wait
--   later (water = water + cost, above the capacity by what leaks in that
--   wait, so every other ask sees the turn spent), else nothing is written
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
-- bucket at now, written back. Every write of the water hash leaves it with
-- a TTL in [1, MAX_TTL_MS] ms that lasts at least until the bucket is empty
-- plus the margin, so the key never lacks one: a PEXPIRE follows the write
-- unless the expiry recorded in "exp" (set on Redis' clock by an earlier
-- write, with 10 s to spare) already covers it (bucket_store of
-- bucket_level.lua).
--
-- KEYS[1]  water hash {water, ts, eff, eff_ts, eff_inc, exp} (keys.Water):
--          water in micro-units, ts in unix µs; eff (units/s) set at eff_ts
--          (µs), recovering by eff_inc units/s every second; exp the unix ms
--          the last PEXPIRE on Redis' clock set (0: none trusted)
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
-- ARGV[6]  optional: a turn due within this many µs is granted now, for a
--          send that much later (absent or 0: only a turn free now), at most
--          10 s
--
-- The level's reading and writing is bucket_level.lua's (lua.Include puts it
-- first), shared with take.lua.
--
-- Returns {allowed, wait_us, water_micro, rate_milli, capacity_micro,
-- delay_us, now_us}: allowed 1 (the job goes; its cost was added), 0 (wait wait_us,
--   >= 1, then ask again) or -1 (never: cost > capacity; wait_us 0, nothing
--   written). water_micro is the level after the call, rate_milli the rate
--   used × 1000, delay_us the wait before the send of a turn granted ahead
--   (0 for one free now, and when not allowed), now_us the bucket's clock
--   of the call (Redis TIME, or ARGV[4]; the last write's when the call is
--   behind it), unix µs: the turn falls at
--   now_us + delay_us, which the drainer maps to its own clock to send on
--   the bucket's (drainer/sendclock.go). Every value is an integer below
--   2^53.
-- Errors: "leaky_bucket: <argument> <value> is out of range" for a refused
-- number.

local function refuse(what, v)
  return bucket_refuse('leaky_bucket', what, v)
end

local rate = bucket_num(ARGV[1], 1000, 0, true, false)
if not rate then return refuse('rate (ARGV[1])', ARGV[1]) end
local capacity = bucket_num(ARGV[2], 1000000, 0, true, false)
if not capacity then return refuse('capacity (ARGV[2])', ARGV[2]) end
local cost = tonumber(ARGV[3])
if cost == nil or not (cost >= 1) or cost == math.huge or cost ~= math.floor(cost) then
  return refuse('cost (ARGV[3])', ARGV[3])
end
local now = bucket_num(ARGV[4], 1, 0, false, true)
if not now then return refuse('now (ARGV[4])', ARGV[4]) end
local margin = bucket_num(ARGV[5], 1, 0, false, true)
if not margin or margin >= 2147483648 then return refuse('margin (ARGV[5])', ARGV[5]) end
local ahead = 0
if ARGV[6] ~= nil then
  ahead = bucket_num(ARGV[6], 1, 0, false, true)
  if not ahead or ahead > 10000000 then return refuse('ahead (ARGV[6])', ARGV[6]) end
end

local b, err = bucket_open(KEYS[1], KEYS[2], rate, capacity, now, margin, 'leaky_bucket')
if not b then return err end

local rate_milli = math.floor(b.rate * 1000)
if cost > b.capacity then
  if b.heal then bucket_store(b, b.water) end
  return {-1, 0, b.water, rate_milli, b.cap_micro, 0, b.now}
end
local cost_micro = cost * 1000000

if b.water + cost_micro <= b.cap_micro then
  bucket_store(b, b.water + cost_micro)
  return {1, 0, b.water + cost_micro, rate_milli, b.cap_micro, 0, b.now}
end
local wait = bucket_wait(b, cost_micro)
if wait <= ahead then
  bucket_store(b, b.water + cost_micro)
  return {1, 0, b.water + cost_micro, rate_milli, b.cap_micro, wait, b.now}
end
if b.heal then bucket_store(b, b.water) end
return {0, wait, b.water, rate_milli, b.cap_micro, 0, b.now}
