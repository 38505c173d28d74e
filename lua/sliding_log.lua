-- sliding_log.lua: the sliding-window log, an admission module of admit.lua
-- (see fixed_window.lua for how modules are assembled; run on its own this
-- file only defines the table sliding_log).
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
--           PEXPIRE key ceil(period / 1000) ms
--   retry   = s_k + period - now, s_k the score of the k-th oldest unit in
--             the window, k = count + cost - limit; -1 (never) when
--             cost > limit
--
-- Expired members are removed only when a request is admitted, so a refusal
-- writes nothing. The set holds up to limit members per key; Policy.Validate
-- caps limit for this algorithm.
--
-- KEYS  (of the driver) key: the policy's key, keys.Admission(...).
-- ARGV  none of its own; the driver passes, as Lua integers: now (unix µs),
--       limit (units per period), period (µs), burst (ignored), cost.
-- returns
--   sliding_log.check(key, now, limit, period, burst, cost) -> state
--     {ok, limit, rem_now, reset_now, rem_after, reset_after, retry} as in
--     fixed_window.lua; check reads and never writes.
--   sliding_log.commit(key, now, state) writes the state; returns nothing.

local sliding_log = {}

function sliding_log.check(key, now, limit, period, burst, cost)
  local lo = '(' .. string.format('%d', now - period)
  local count = redis.call('ZCOUNT', key, lo, '+inf')
  local st = {
    ok = count + cost <= limit,
    limit = limit,
    rem_now = math.max(0, limit - count),
    reset_now = 0,
    rem_after = limit - count - cost,
    reset_after = period,
    retry = 0,
    cost = cost,
    period = period,
  }
  if count > 0 then
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    st.reset_now = math.max(0, tonumber(newest[2]) + period - now)
    st.reset_after = math.max(period, st.reset_now)
  end
  if cost > limit then
    st.retry = -1
  elseif not st.ok then
    local k = count + cost - limit
    local e = redis.call('ZRANGEBYSCORE', key, lo, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
    st.retry = math.max(1, tonumber(e[2]) + period - now)
  end
  return st
end

function sliding_log.commit(key, now, st)
  local at = string.format('%d', now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - st.period))
  local seq = redis.call('ZCOUNT', key, at, at)
  local args = {}
  for i = 1, st.cost do
    args[#args + 1] = at
    args[#args + 1] = at .. ':' .. string.format('%d', seq + i)
    if #args >= 1000 or i == st.cost then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  local ttl = math.max(1, math.ceil(st.reset_after / 1000))
  redis.call('PEXPIRE', key, string.format('%d', ttl))
end
