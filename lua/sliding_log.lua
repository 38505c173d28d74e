-- sliding_log.lua: the sliding-window log, an admission module of admit.lua
-- (see fixed_window.lua for how modules are assembled and for the
-- check/commit functions every module defines; run on its own this file only
-- defines local functions).
--
-- A sorted set at key holds one member per admitted unit, scored by its unix
-- µs. A unit admitted at s counts while now < s + period, so the window is
-- the half-open (now - period, now].
--
--   count   = ZCOUNT key (now-period +inf
--   allowed when count + cost <= limit
--   commit  ZREMRANGEBYSCORE key -inf now-period (drop expired units), then
--           ZADD cost members "<now>:<seq>" at score now, seq continuing
--           after the members already at that score (ZCOUNT key now now), so
--           the cost units of one request and equal instants never collide;
--           PEXPIRE key to the newest member's expiry (period after now)
--   retry   = s_k + period - now, s_k the score of the k-th oldest unit in
--             the window, k = count + cost - limit; -1 (never) when
--             cost > limit
--
-- Expired members are removed only when a request is admitted, so a refusal
-- writes nothing. The set holds up to limit members per key; Policy.Validate
-- caps limit for this algorithm.
--
-- KEYS  (of the driver) key: the policy's key, keys.Admission(...).
-- ARGV  none of its own; the driver passes, as Lua numbers: now (unix µs),
--       limit (units per period), period (µs), burst (ignored), cost.
-- returns  sliding_log_check: as in fixed_window.lua (no x, y, z);
--       sliding_log_commit: nothing.

local function sliding_log_check(key, now, limit, period, burst, cost)
  local lo = '(' .. fmt('%d', now - period)
  local count = call('ZCOUNT', key, lo, '+inf')
  local ok = count + cost <= limit
  local reset_now, reset_after = 0, period
  if count > 0 then
    local newest = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset_now = max(0, tonumber(newest[2]) + period - now)
    reset_after = max(period, reset_now)
  end
  local retry = 0
  if cost > limit then
    retry = -1
  elseif not ok then
    local e = call('ZRANGEBYSCORE', key, lo, '+inf', 'WITHSCORES', 'LIMIT', count + cost - limit - 1, 1)
    retry = max(1, tonumber(e[2]) + period - now)
  end
  return ok, limit, max(0, limit - count), reset_now, limit - count - cost, reset_after, retry
end

local function sliding_log_commit(key, now, cost, period, reset_after)
  local at = fmt('%d', now)
  call('ZREMRANGEBYSCORE', key, '-inf', fmt('%d', now - period))
  local seq = call('ZCOUNT', key, at, at)
  local args = {}
  for i = 1, cost do
    args[#args + 1] = at
    args[#args + 1] = at .. ':' .. fmt('%d', seq + i)
    if #args >= 1000 or i == cost then
      call('ZADD', key, unpack(args))
      args = {}
    end
  end
  call('PEXPIRE', key, fmt('%d', max(1, ceil(reset_after / 1000))))
end
