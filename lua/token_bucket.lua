-- token_bucket.lua: the token bucket with lazy refill, an admission module of
-- admit.lua (see fixed_window.lua for how modules are assembled; run on its
-- own this file only defines the table token_bucket).
--
-- A Hash at key holds {tokens, ts}. To stay in integers, tokens are counted
-- in period-ths of a token: one token is `period` (µs) scaled units, the
-- bucket holds cap = burst * period of them and refills at `limit` scaled
-- units per µs (limit tokens per period). ts is the unix µs of the last
-- write. A missing key is a full bucket.
--
--   tokens  = min(cap, tokens + (now - ts) * limit)
--   allowed when tokens >= cost * period; then tokens -= cost * period, ts = now
--   commit  HSET key tokens ts, PEXPIRE key to the time to refill fully,
--           ceil((cap - tokens) / limit) µs
--   remaining = floor(tokens / period)
--   retry   = ceil((cost * period - tokens) / limit) when refused; -1 (never)
--             when cost > burst
--
-- KEYS  (of the driver) key: the policy's key, keys.Admission(...).
-- ARGV  none of its own; the driver passes, as Lua integers: now (unix µs),
--       limit (tokens per period), period (µs), burst (bucket size in tokens,
--       >= 1), cost (tokens).
-- returns
--   token_bucket.check(key, now, limit, period, burst, cost) -> state
--     {ok, limit, rem_now, reset_now, rem_after, reset_after, retry} as in
--     fixed_window.lua, limit being burst; check reads and never writes.
--   token_bucket.commit(key, now, state) writes the state; returns nothing.

local token_bucket = {}

function token_bucket.check(key, now, limit, period, burst, cost)
  local cap = burst * period
  local h = redis.call('HMGET', key, 'tokens', 'ts')
  local tokens, ts = tonumber(h[1]), tonumber(h[2])
  if tokens == nil or ts == nil then
    tokens, ts = cap, now
  else
    tokens = math.min(cap, tokens + math.max(0, now - ts) * limit)
  end
  local need = cost * period
  local left = tokens - need
  local st = {
    ok = left >= 0,
    limit = burst,
    rem_now = math.floor(tokens / period),
    reset_now = math.ceil((cap - tokens) / limit),
    rem_after = math.floor(left / period),
    reset_after = math.ceil((cap - left) / limit),
    retry = 0,
    tokens = left,
    ts = math.max(now, ts),
  }
  if need > cap then
    st.retry = -1
  elseif not st.ok then
    st.retry = math.ceil(-left / limit)
  end
  return st
end

function token_bucket.commit(key, now, st)
  redis.call('HSET', key, 'tokens', string.format('%d', st.tokens), 'ts', string.format('%d', st.ts))
  local ttl = math.max(1, math.ceil(st.reset_after / 1000))
  redis.call('PEXPIRE', key, string.format('%d', ttl))
end
