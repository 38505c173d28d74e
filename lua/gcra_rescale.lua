-- gcra_rescale.lua: carry a GCRA policy's stored state over a change of its
-- rate, so a tenant whose plan changed is judged by the new plan.
--
-- The state is TAT (unix µs, see gcra.lua). Its outstanding debt TAT − now
-- is (TAT − now) / T_old requests at the old emission interval
-- T_old = ceil(period_old / limit_old); the same number of requests at the
-- new interval T_new = ceil(period_new / limit_new) is
--
--   TAT' = now + ceil((TAT − now) × T_new / T_old)
--
-- at most tau_new = burst_new × T_new ahead (a full bucket of the new plan:
-- gcra.lua forgets a TAT further ahead as another policy's state, so a
-- debt larger than the new burst, left as it was, wiped the debt and gave
-- a heavy user a fresh burst: limit 1000/s cut to 1/s after a batch of
-- 1000 admitted the next request at once),
-- stored with PX = ceil((TAT' − now) / 1000) ms, as gcra.lua does. A TAT at
-- or before now (no debt) or an absent key is left alone. With T_old = 1 s
-- and T_new = 0.1 s (1/s upgraded to 10/s), a TAT 5 s ahead (5 requests of
-- debt) becomes 0.5 s ahead.
--
-- KEYS[1]  the policy's TAT key (keys.Admission(tenant, "gcra", policy))
-- ARGV[1]  now, unix µs; 0 reads Redis TIME
-- ARGV[2]  old limit (units per period, >= 1)
-- ARGV[3]  old period (µs, >= 1)
-- ARGV[4]  new limit (units per period, >= 1)
-- ARGV[5]  new period (µs, >= 1)
-- ARGV[6]  new burst (units, >= 1)
--
-- Returns {rescaled (1 or 0), tat (µs after the call; 0 when there is no
-- key), now (µs)}.

local lo, po, ln, pn, bn = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if not (lo and po and ln and pn and bn) or lo < 1 or po < 1 or ln < 1 or pn < 1 or bn < 1 then
  return redis.error_reply('ERR gcra_rescale: limits, periods and the new burst must be numbers >= 1')
end
local now = tonumber(ARGV[1])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil then
  return { 0, 0, now }
end
if tat <= now then
  return { 0, tat, now }
end
local t_old = math.ceil(po / lo)
local t_new = math.ceil(pn / ln)
local debt = tat - now
local prod = debt * t_new
local scaled
if prod < 9007199254740992 then
  -- exact integer product; one correctly rounded division
  scaled = math.ceil(prod / t_old)
else
  scaled = math.ceil(debt / t_old * t_new)
end
local tau = bn * t_new
if not (scaled <= tau) then scaled = tau end
local new = now + scaled
redis.call('SET', KEYS[1], string.format('%d', new), 'PX',
  string.format('%d', math.max(1, math.ceil(scaled / 1000))))
return { 1, new, now }
