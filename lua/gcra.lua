-- gcra.lua: the Generic Cell Rate Algorithm, an admission module of admit.lua
-- (see fixed_window.lua for how modules are assembled; run on its own this
-- file only defines the table gcra).
--
-- One String key holds TAT, the theoretical arrival time, in unix µs. With
-- the emission interval T = ceil(period / limit) µs and the burst tolerance
-- tau = burst * T:
--
--   tat     = GET key, or now when absent
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
-- ARGV  none of its own; the driver passes, as Lua integers: now (unix µs),
--       limit (units per period), period (µs), burst (units, >= 1), cost.
-- returns
--   gcra.check(key, now, limit, period, burst, cost) -> state
--     {ok, limit, rem_now, reset_now, rem_after, reset_after, retry} as in
--     fixed_window.lua, limit being burst; check reads and never writes.
--   gcra.commit(key, now, state) writes the state; returns nothing.

local gcra = {}

function gcra.check(key, now, limit, period, burst, cost)
  local t = math.ceil(period / limit)
  local tau = burst * t
  local tat = tonumber(redis.call('GET', key)) or now
  local base = math.max(tat, now)
  local new = base + cost * t
  local st = {
    ok = new - now <= tau,
    limit = burst,
    rem_now = math.max(0, math.floor((tau - (base - now)) / t)),
    reset_now = base - now,
    rem_after = math.floor((tau - (new - now)) / t),
    reset_after = new - now,
    retry = 0,
    new = new,
  }
  if cost * t > tau then
    st.retry = -1
  elseif not st.ok then
    st.retry = new - tau - now
  end
  return st
end

function gcra.commit(key, now, st)
  local ttl = math.max(1, math.ceil(st.reset_after / 1000))
  redis.call('SET', key, string.format('%d', st.new), 'PX', string.format('%d', ttl))
end
