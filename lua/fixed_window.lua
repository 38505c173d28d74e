-- fixed_window.lua: the fixed-window counter, an admission module of
-- admit.lua. lua.Admit() builds the runnable script by concatenating the
-- prelude admit_prelude.lua (floor, ceil, max, min, fmt, tonumber, call:
-- math's, string.format and redis.call as locals), the five algorithm
-- modules and the driver admit.lua; run on its own this file only defines two
-- local functions and touches nothing.
--
-- Every module has the same two functions, plain locals returning several
-- values, because a script's top level runs on every EVALSHA and Lua 5.1
-- allocates each table it builds there:
--
--   <alg>_check(key, now, limit, period, burst, cost)
--     -> ok, cap, rem_now, reset_now, rem_after, reset_after, retry, x, y, z
--     reads only. ok: this policy admits cost now. cap: units admissible at
--     once from empty. rem_now/reset_now: remaining units and µs until empty
--     of the state as it is; rem_after/reset_after: the same after commit.
--     retry: µs until cost could pass (0 when ok, -1 never). x, y, z: what
--     commit writes.
--   <alg>_commit(key, now, cost, period, reset_after, x, y, z)
--     writes the state checked, with its PX TTL; returns nothing.
--
-- Fixed window: windows are aligned to the unix epoch, window
-- w = floor(now / period) covers [w*period, (w+1)*period). Its count is a
-- String at key .. ":" .. w, which keeps key's hash tag (same cluster slot).
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
-- ARGV  none of its own; the driver passes, as Lua numbers: now (unix µs),
--       limit (units per window), period (µs), burst (ignored), cost (units).
-- returns  fixed_window_check: as above, x = key:w; fixed_window_commit:
--       nothing.

local function fixed_window_check(key, now, limit, period, burst, cost)
  local w = floor(now / period)
  local wend = (w + 1) * period - now
  local wkey = key .. ':' .. fmt('%d', w)
  local count = tonumber(call('GET', wkey)) or 0
  local ok = count + cost <= limit
  local retry = 0
  if cost > limit then
    retry = -1
  elseif not ok then
    retry = wend
  end
  local reset_now = 0
  if count > 0 then
    reset_now = wend
  end
  return ok, limit, max(0, limit - count), reset_now, limit - count - cost, wend, retry, wkey
end

local function fixed_window_commit(key, now, cost, period, reset_after, wkey)
  if call('INCRBY', wkey, cost) == cost then
    call('PEXPIRE', wkey, fmt('%d', max(1, ceil(period / 1000))))
  end
end
