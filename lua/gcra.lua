-- gcra.lua: the Generic Cell Rate Algorithm, an admission module of admit.lua
-- (see fixed_window.lua for how modules are assembled and for the
-- check/commit functions every module defines; run on its own this file only
-- defines local functions).
--
-- One String key holds TAT, the theoretical arrival time, in unix µs. With
-- the emission interval T = ceil(period / limit) µs and the burst tolerance
-- tau = burst * T:
--
--   tat     = GET key, or now when absent or more than tau ahead (a TAT no
--             commit of this policy leaves: another policy's state)
--   new     = max(tat, now) + cost * T
--   allowed when new - now <= tau
--   commit  SET key new PX ceil((new - now) / 1000): the key lives exactly
--           until the state would be empty again
--   remaining = floor((tau - (tat' - now)) / T), tat' the TAT after the call
--   retry   = new - tau - now when refused; -1 (never) when cost * T > tau,
--             i.e. cost > burst
--
-- With T = 1 s and tau = 5 s (limit 1 per second, burst 5), requests at
-- 10.0, 11.0, 4 x 12.0 and 12.1 s pass and leave TAT = 17.0 s with a TTL of
-- 4.9 s; the next one at 12.1 s would make TAT 18.0 s, 5.9 s > tau ahead, and
-- is refused without a write.
--
-- KEYS  (of the driver) key: the policy's key, keys.Admission(...).
-- ARGV  none of its own; the driver passes, as Lua numbers: now (unix µs),
--       limit (units per period), period (µs), burst (units, >= 1), cost.
-- returns  gcra_check: as in fixed_window.lua, cap = burst, x = the new TAT;
--       gcra_commit: nothing.

local function gcra_check(key, now, limit, period, burst, cost)
  local t = ceil(period / limit)
  local tau = burst * t
  local base = deferred_val[key] or tonumber(call('GET', key)) or now
  if base < now then
    base = now
  elseif base - now > tau then
    -- No commit under this policy leaves TAT more than tau ahead: the state
    -- is another policy's (a longer period before an algorithm switch, a
    -- lowered burst). It is forgotten, as a new tenant's would be, never
    -- read as a wait of the old policy's length; the next commit replaces it.
    base = now
  end
  local new = base + cost * t
  local ok = new - now <= tau
  local retry = 0
  if cost * t > tau then
    retry = -1
  elseif not ok then
    retry = new - tau - now
  end
  return ok, burst, max(0, floor((tau - (base - now)) / t)), base - now,
    floor((tau - (new - now)) / t), new - now, retry, new
end

-- The SET is deferred to the end of the call (defer_set, admit_prelude.lua):
-- a later decision of the call on the same key reads the new TAT from there,
-- and the key is written once. Both numbers are whole, and redis.call passes
-- a number as "%.17g", which writes any whole number below 2^53 exactly
-- ("1700000000000000"), so they go as numbers: a string.format each cost
-- more than the SET.
local function gcra_commit(key, now, cost, period, reset_after, new)
  defer_set(key, new, max(1, ceil(reset_after / 1000)))
end
