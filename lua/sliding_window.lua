-- sliding_window.lua: the sliding-window counter, an admission module of
-- admit.lua (see fixed_window.lua for how modules are assembled; run on its
-- own this file only defines the table sliding_window).
--
-- Windows are aligned to the unix epoch: window w = floor(now / period). The
-- counts of the current and the previous window live in one Hash at key,
-- {w = index of the current window, c = its count, p = the previous window's
-- count}, so every key the algorithm uses is declared in KEYS. At elapsed =
-- now - w*period into window w:
--
--   estimate = floor(prev * (period - elapsed) / period) + cur
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
-- ARGV  none of its own; the driver passes, as Lua integers: now (unix µs),
--       limit (units per window), period (µs), burst (ignored), cost (units).
-- returns
--   sliding_window.check(key, now, limit, period, burst, cost) -> state
--     {ok, limit, rem_now, reset_now, rem_after, reset_after, retry} as in
--     fixed_window.lua; check reads and never writes.
--   sliding_window.commit(key, now, state) writes the state; returns nothing.

local sliding_window = {}

-- offset into a window at which floor(cnt * (period - x) / period) <= need
-- first holds.
local function sliding_window_wait(cnt, need, period)
  if cnt <= need then
    return 0
  end
  return math.floor(period - (need + 1) * period / cnt) + 1
end

function sliding_window.check(key, now, limit, period, burst, cost)
  local h = redis.call('HMGET', key, 'w', 'c', 'p')
  local sw, sc, sp = tonumber(h[1]), tonumber(h[2]) or 0, tonumber(h[3]) or 0
  local w = math.floor(now / period)
  local prev, cur = 0, 0
  if sw ~= nil and sw >= w then
    -- same window, or a stored window ahead of now (a clock that went back):
    -- keep the stored counts, never lose them.
    w, prev, cur = sw, sp, sc
  elseif sw ~= nil and sw == w - 1 then
    prev = sc
  end
  local elapsed = math.max(0, now - w * period)
  local est = math.floor(prev * (period - elapsed) / period) + cur
  local st = {
    ok = est + cost <= limit,
    limit = limit,
    rem_now = math.max(0, limit - est),
    reset_now = 0,
    rem_after = limit - est - cost,
    reset_after = (w + 2) * period - now,
    retry = 0,
    w = w,
    c = cur + cost,
    p = prev,
  }
  if cur > 0 then
    st.reset_now = (w + 2) * period - now
  elseif prev > 0 then
    st.reset_now = (w + 1) * period - now
  end
  if cost > limit then
    st.retry = -1
  elseif not st.ok then
    if cur + cost <= limit then
      st.retry = sliding_window_wait(prev, limit - cost - cur, period) - elapsed
    else
      -- the current window must first become the previous one
      st.retry = (w + 1) * period - now + sliding_window_wait(cur, limit - cost, period)
    end
    st.retry = math.max(1, st.retry)
  end
  return st
end

function sliding_window.commit(key, now, st)
  redis.call('HSET', key, 'w', string.format('%d', st.w), 'c', string.format('%d', st.c),
    'p', string.format('%d', st.p))
  local ttl = math.max(1, math.ceil(st.reset_after / 1000))
  redis.call('PEXPIRE', key, string.format('%d', ttl))
end
