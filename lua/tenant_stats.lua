-- tenant_stats.lua: read a tenant's drain-side figures at one instant
-- (GET /v1/tenants/{id}/stats). Read-only; the caller computes the rates
-- and levels from the raw values with the formulas of leaky_bucket.lua.
--
-- KEYS[1]  backlog counter (keys.Backlog)
-- KEYS[2]  override hash (keys.Override): outflow_rate, outflow_capacity
-- KEYS[3]  water hash (keys.Water): water, ts, eff, eff_ts, eff_inc
-- KEYS[4]  deliveries in progress (keys.Delivering), scored by deadline ms
-- KEYS[5]  the dead index (keys.JobIndex(t, "dead"), both backends)
-- KEYS[6]  outflow per second (keys.Outflow), field = unix second
-- KEYS[7]  optional: the leases (keys.Processing, Redis backend), scored by
--          deadline ms: a job started by take.lua counts there, not in KEYS[4]
-- ARGV[1]  the measuring window, whole seconds >= 1: the seconds now-window
--          .. now-1 are summed (the current, incomplete second is not)
--
-- Returns 12 strings ("" for a missing value):
--   {now_us, backlog, override_rate, override_capacity, water_micro, ts_us,
--    eff, eff_ts_us, eff_inc, in_flight, dead_letters, units_in_window}
-- where now_us is Redis TIME and in_flight counts the deliveries whose
-- deadline has not passed: the larger of KEYS[4]'s and KEYS[7]'s counts
-- (on the Redis backend every delivery in KEYS[4] is also leased in KEYS[7];
-- on Kafka KEYS[7] is empty).

local window = tonumber(ARGV[1])
if window == nil or window < 1 or window ~= math.floor(window) then
  return redis.error_reply('ERR tenant_stats: window must be an integer >= 1')
end
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now_ms = sec * 1000 + math.floor(tonumber(t[2]) / 1000)

local function s(v)
  if v == false or v == nil then return '' end
  return tostring(v)
end

local ov = redis.call('HMGET', KEYS[2], 'outflow_rate', 'outflow_capacity')
local st = redis.call('HMGET', KEYS[3], 'water', 'ts', 'eff', 'eff_ts', 'eff_inc')
local inflight = redis.call('ZCOUNT', KEYS[4], '(' .. now_ms, '+inf')
if KEYS[7] then
  inflight = math.max(inflight, redis.call('ZCOUNT', KEYS[7], '(' .. now_ms, '+inf'))
end
local dead = redis.call('ZCARD', KEYS[5])
local fields = {}
for i = window, 1, -1 do
  fields[#fields + 1] = tostring(sec - i)
end
local units = 0
for _, v in ipairs(redis.call('HMGET', KEYS[6], unpack(fields))) do
  units = units + (tonumber(v) or 0)
end
return {
  t[1] .. string.format('%06d', tonumber(t[2])),
  s(redis.call('GET', KEYS[1])), s(ov[1]), s(ov[2]),
  s(st[1]), s(st[2]), s(st[3]), s(st[4]), s(st[5]),
  tostring(inflight), tostring(dead), tostring(units),
}
