-- drain_adapt.lua: multiplicative decrease of a tenant's adaptive outflow
-- rate after the downstream answered 429 or 503 (AIMD; the additive
-- recovery is computed by leaky_bucket.lua from the fields written here).
--
--   rate    = override outflow_rate, else ARGV[1]
--   current = min(rate, eff + (now - eff_ts) * eff_inc)    (rate when unset)
--   eff     = max(floor, current * factor); eff_ts = now; eff_inc = ARGV[4]
--
-- A decrease within ARGV[5] ms of the previous one is ignored, so the many
-- jobs in flight when a downstream starts refusing lower the rate once, not
-- once each.
--
-- KEYS[1]  water hash (keys.Water)
-- KEYS[2]  override hash (keys.Override), optional field outflow_rate
-- ARGV[1]  configured rate, units/s (> 0)
-- ARGV[2]  floor, units/s (> 0)
-- ARGV[3]  factor, 0 < factor < 1
-- ARGV[4]  recovery, units/s gained per second
-- ARGV[5]  cooldown, ms
-- ARGV[6]  now, unix µs; "0" reads Redis TIME
-- ARGV[7]  PEXPIRE floor of the hash, ms (recovery time is added)
--
-- Returns {rate_milli, changed (1|0)}: the effective rate × 1000 after the
-- call.

local rate = tonumber(ARGV[1])
local floor = tonumber(ARGV[2])
local factor = tonumber(ARGV[3])
local inc = tonumber(ARGV[4])
local cooldown = tonumber(ARGV[5]) * 1000
local now = tonumber(ARGV[6])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local ovr = tonumber(redis.call('HGET', KEYS[2], 'outflow_rate'))
if ovr and ovr > 0 then rate = ovr end
if floor > rate then floor = rate end

local st = redis.call('HMGET', KEYS[1], 'eff', 'eff_ts', 'eff_inc')
local eff = tonumber(st[1])
local eff_ts = tonumber(st[2]) or now
local cur = rate
if eff and eff > 0 then
  local since = now - eff_ts
  if since < 0 then since = 0 end
  cur = eff + since / 1000000 * (tonumber(st[3]) or 0)
  if cur > rate then cur = rate end
  if since < cooldown then
    return {math.floor(cur * 1000), 0}
  end
end
local new = cur * factor
if new < floor then new = floor end
redis.call('HSET', KEYS[1], 'eff', tostring(new), 'eff_ts', now, 'eff_inc', tostring(inc))
local recover_ms = 0
if inc > 0 then recover_ms = math.ceil((rate - new) / inc * 1000) end
local ttl = redis.call('PTTL', KEYS[1])
local want = recover_ms + tonumber(ARGV[7])
if ttl < want then redis.call('PEXPIRE', KEYS[1], want) end
return {math.floor(new * 1000), 1}
