-- fixed_window.lua: the fixed-window counter, an admission module of
-- admit.lua. lua.Admit() builds the runnable script by concatenating the five
-- algorithm modules and the driver admit.lua; run on its own this file only
-- defines the table fixed_window and touches nothing.
--
-- Windows are aligned to the unix epoch: window w = floor(now / period) covers
-- [w*period, (w+1)*period). Its count is a String at key .. ":" .. w, which
-- keeps key's hash tag, so it lives in the same cluster slot.
--
--   count   = GET key:w, or 0
--   allowed when count + cost <= limit
--   commit  INCRBY key:w cost, and PEXPIRE key:w period when the INCRBY
--           created the key (both in the one script: no key without TTL). The
--           key lives at most until the end of window w+1 and is never read
--           after window w; a TTL of one period rather than "to the window's
--           end" keeps a counter created just before the boundary from
--           expiring while requests of its window are still arriving.
--   retry   = (w+1)*period - now when refused; -1 (never) when cost > limit
--
-- Known weakness: the count resets at every boundary, so up to 2 * limit units
-- pass within a moment around a boundary (limit just before, limit just after).
--
-- KEYS  (of the driver) key: the policy's base key, keys.Admission(...).
-- ARGV  none of its own; the driver passes, as Lua integers:
--         now (unix µs), limit (units per window), period (µs), burst
--         (ignored), cost (units).
-- returns
--   fixed_window.check(key, now, limit, period, burst, cost) -> state, a table
--     {ok, limit, rem_now, reset_now, rem_after, reset_after, retry}: ok is a
--     boolean, the rest integers (units, µs); rem_now/reset_now describe the
--     state as it is, rem_after/reset_after the state after commit; retry is 0
--     when ok. check reads and never writes.
--   fixed_window.commit(key, now, state) writes the state; returns nothing.

local fixed_window = {}

function fixed_window.check(key, now, limit, period, burst, cost)
  local w = math.floor(now / period)
  local wend = (w + 1) * period
  local wkey = key .. ':' .. string.format('%d', w)
  local count = tonumber(redis.call('GET', wkey)) or 0
  local st = {
    ok = count + cost <= limit,
    limit = limit,
    rem_now = math.max(0, limit - count),
    reset_now = 0,
    rem_after = limit - count - cost,
    reset_after = wend - now,
    retry = 0,
    wkey = wkey,
    cost = cost,
    period = period,
  }
  if count > 0 then
    st.reset_now = wend - now
  end
  if cost > limit then
    st.retry = -1
  elseif not st.ok then
    st.retry = wend - now
  end
  return st
end

function fixed_window.commit(key, now, st)
  local n = redis.call('INCRBY', st.wkey, st.cost)
  if n == st.cost then
    local ttl = math.max(1, math.ceil(st.period / 1000))
    redis.call('PEXPIRE', st.wkey, string.format('%d', ttl))
  end
end
