-- admit.lua: the admission driver. lua.Admit() runs it concatenated after the
-- algorithm modules fixed_window.lua, sliding_window.lua, gcra.lua,
-- token_bucket.lua and sliding_log.lua, so one EVALSHA decides a request
-- against the tenant's backlog gate and every policy at once, all or
-- nothing: the policies' new state is written only when the gate and every
-- policy admit; a refusal writes nothing at all.
--
-- KEYS[1]    the tenant's backlog counter (keys.Backlog), read only
-- KEYS[1+i]  the state key of policy i (keys.Admission), i = 1..n; every key
--            carries the tenant's hash tag, so all are in one cluster slot
-- ARGV[1]    now, unix µs; 0 reads Redis TIME (TIME[1]*1000000 + TIME[2])
-- ARGV[2]    cost, integer units >= 1
-- ARGV[3]    max_backlog, integer units; 0 = no gate. The gate refuses when
--            backlog + cost > max_backlog (admits while it stays <= max)
-- ARGV[4+4*(i-1) .. 7+4*(i-1)]  policy i: algorithm (fixed_window,
--            sliding_window, gcra, token_bucket or sliding_log), limit
--            (units per period), period (µs), burst (units; used by gcra and
--            token_bucket)
--
-- Returns an array of integers:
--   [1] 1 when admitted, else 0
--   [2] 0 when admitted; -1 when the backlog gate refused (checked first);
--       else i, the first refusing policy
--   [3] the backlog as read (0 when max_backlog is 0: not read)
--   then 5 per policy i: allowed (1/0: would this policy alone admit),
--       limit (units admissible at once from empty: limit, or burst for gcra
--       and token_bucket), remaining (units left after this decision: after
--       the write when admitted, of the unchanged state when refused),
--       retry_after µs (0 when this policy admits, -1 never: cost exceeds
--       what the policy can ever admit), reset_after µs (until the policy's
--       state is back to empty)

local modules = {
  fixed_window = fixed_window,
  sliding_window = sliding_window,
  gcra = gcra,
  token_bucket = token_bucket,
  sliding_log = sliding_log,
}

local npol = (#ARGV - 3) / 4
if npol ~= math.floor(npol) or npol < 0 or #KEYS ~= npol + 1 then
  return redis.error_reply('ERR admit: want 1 + n keys and 3 + 4n args')
end

local now = tonumber(ARGV[1])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost = tonumber(ARGV[2])
local max_backlog = tonumber(ARGV[3])
if cost == nil or cost < 1 or max_backlog == nil or max_backlog < 0 then
  return redis.error_reply('ERR admit: cost must be >= 1 and max_backlog >= 0')
end

local admitted, violated, backlog = true, 0, 0
if max_backlog > 0 then
  backlog = tonumber(redis.call('GET', KEYS[1])) or 0
  if backlog + cost > max_backlog then
    admitted, violated = false, -1
  end
end

local states = {}
for i = 1, npol do
  local o = 4 * (i - 1) + 3
  local mod = modules[ARGV[o + 1]]
  local limit, period, burst = tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4])
  if mod == nil or limit == nil or period == nil or burst == nil or limit < 1 or period < 1 then
    return redis.error_reply('ERR admit: bad policy ' .. i)
  end
  local st = mod.check(KEYS[i + 1], now, limit, period, burst, cost)
  states[i] = st
  if admitted and not st.ok then
    admitted, violated = false, i
  end
end

local out = { admitted and 1 or 0, violated, backlog }
for i = 1, npol do
  local st = states[i]
  local rem, reset, retry = st.rem_now, st.reset_now, st.retry
  if admitted then
    modules[ARGV[4 * (i - 1) + 4]].commit(KEYS[i + 1], now, st)
    rem, reset, retry = st.rem_after, st.reset_after, 0
  elseif st.ok then
    retry = 0
  end
  local n = #out
  out[n + 1] = st.ok and 1 or 0
  out[n + 2] = st.limit
  out[n + 3] = rem
  out[n + 4] = retry
  out[n + 5] = reset
end
return out
