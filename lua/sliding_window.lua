-- sliding_window.lua: the sliding-window counter, an admission module of
-- admit.lua (see fixed_window.lua for how modules are assembled and for the
-- check/commit functions every module defines; run on its own this file only
-- defines local functions).
--
-- Windows are aligned to the unix epoch: window w = floor(now / period). The
-- counts of the current and the previous window live in one Hash at key,
-- {w = index of the current window, c = its count, p = the previous window's
-- count}, so every key the algorithm uses is declared in KEYS. At elapsed =
-- now - w*period into window w:
--
--   estimate = floor(prev * (period - elapsed) / period) + cur
--            (a stored window more than one ahead of w is another period's
--            state and counts as empty)
--   allowed when estimate + cost <= limit
--   commit   HSET key w c p, PEXPIRE key to the end of window w+1 (the
--            counts matter until the current window has become the previous)
--   retry    the first instant at which the estimate (with the previous
--            window's weight falling, or after the next boundary) leaves room
--            for cost; -1 (never) when cost > limit
--
-- The estimate assumes the previous window's units arrived evenly. When they
-- came at its very end it undercounts: over a trailing window of one period
-- up to (1 + f) * limit units can pass at fraction f of the current window,
-- always less than 2 * limit.
--
-- KEYS  (of the driver) key: the policy's key, keys.Admission(...).
-- ARGV  none of its own; the driver passes, as Lua numbers: now (unix µs),
--       limit (units per window), period (µs), burst (ignored), cost (units).
-- returns  sliding_window_check: as in fixed_window.lua, with x, y, z = the
--       window index, its count and the previous count to write;
--       sliding_window_commit: nothing.

-- offset into a window at which floor(cnt * (period - x) / period) <= need
-- first holds.
local function sliding_window_wait(cnt, need, period)
  if cnt <= need then
    return 0
  end
  return floor(period - (need + 1) * period / cnt) + 1
end

local function sliding_window_check(key, now, limit, period, burst, cost)
  local h = call('HMGET', key, 'w', 'c', 'p')
  local sw = tonumber(h[1])
  local w = floor(now / period)
  local prev, cur = 0, 0
  if sw ~= nil and sw >= w and sw <= w + 1 then
    -- same window, or a stored window one ahead of now (a clock that went
    -- back): keep the stored counts, never lose them.
    w, prev, cur = sw, tonumber(h[3]) or 0, tonumber(h[2]) or 0
  -- A stored window further ahead is another period's (the policy's period
  -- was lengthened): forgotten, as a new tenant's would be, never read as a
  -- wait of its index; the next commit replaces it.
  elseif sw ~= nil and sw == w - 1 then
    prev = tonumber(h[2]) or 0
  end
  local elapsed = max(0, now - w * period)
  local est = floor(prev * (period - elapsed) / period) + cur
  local ok = est + cost <= limit
  local reset_after = (w + 2) * period - now
  local reset_now = 0
  if cur > 0 then
    reset_now = reset_after
  elseif prev > 0 then
    reset_now = (w + 1) * period - now
  end
  local retry = 0
  if cost > limit then
    retry = -1
  elseif not ok then
    if cur + cost <= limit then
      retry = sliding_window_wait(prev, limit - cost - cur, period) - elapsed
    else
      -- the current window must first become the previous one
      retry = (w + 1) * period - now + sliding_window_wait(cur, limit - cost, period)
    end
    retry = max(1, retry)
  end
  return ok, limit, max(0, limit - est), reset_now, limit - est - cost, reset_after, retry,
    w, cur + cost, prev
end

local function sliding_window_commit(key, now, cost, period, reset_after, w, c, p)
  call('HSET', key, 'w', fmt('%d', w), 'c', fmt('%d', c),
    'p', fmt('%d', p))
  call('PEXPIRE', key, fmt('%d', max(1, ceil(reset_after / 1000))))
end
