-- token_bucket.lua: the token bucket with lazy refill, an admission module of
-- admit.lua (see fixed_window.lua for how modules are assembled and for the
-- check/commit functions every module defines; run on its own this file only
-- defines local functions).
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
-- ARGV  none of its own; the driver passes, as Lua numbers: now (unix µs),
--       limit (tokens per period), period (µs), burst (bucket size in tokens,
--       >= 1), cost (tokens).
-- returns  token_bucket_check: as in fixed_window.lua, cap = burst, x, y =
--       the tokens and ts to write; token_bucket_commit: nothing.

local function token_bucket_check(key, now, limit, period, burst, cost)
  local cap = burst * period
  local h = call('HMGET', key, 'tokens', 'ts')
  local tokens, ts = tonumber(h[1]), tonumber(h[2])
  if tokens == nil or ts == nil then
    tokens, ts = cap, now
  elseif now > ts then
    tokens = min(cap, tokens + (now - ts) * limit)
    ts = now
  end
  local need = cost * period
  local left = tokens - need
  local retry = 0
  if need > cap then
    retry = -1
  elseif left < 0 then
    retry = ceil(-left / limit)
  end
  return left >= 0, burst, floor(tokens / period), ceil((cap - tokens) / limit),
    floor(left / period), ceil((cap - left) / limit), retry, left, ts
end

local function token_bucket_commit(key, now, cost, period, reset_after, tokens, ts)
  call('HSET', key, 'tokens', fmt('%d', tokens), 'ts', fmt('%d', ts))
  call('PEXPIRE', key, fmt('%d', max(1, ceil(reset_after / 1000))))
end
