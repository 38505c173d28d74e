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
-- ARGV[2]    cost, integer units >= 1: what the backlog gate counts
-- ARGV[3]    max_backlog, integer units; 0 = no gate. The gate refuses when
--            backlog + cost > max_backlog (admits while it stays <= max)
-- ARGV[4]    dry_run: 1 decides and reports but writes nothing (the state
--            headers of an answer that was not admitted), else 0
-- ARGV[5i .. 5i+4]  policy i: algorithm (fixed_window, sliding_window,
--            gcra, token_bucket or sliding_log), limit (units per period),
--            period (µs), burst (units; used by gcra and token_bucket), and
--            the cost charged to this policy (>= 1; a batch mixing job types
--            charges each type's policy only its own jobs)
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
--
-- Many decisions in one call (the Admitter's batches, on a standalone
-- Redis, or of one tenant on a cluster): ARGV[1] is the word many, ARGV[2]
-- the count m, then per decision j its policy count n_j, followed by its
-- now, cost, max_backlog, dry_run and n_j policies exactly as above; KEYS
-- are each decision's 1 + n_j keys in turn. The decisions are evaluated in
-- order, each exactly as its own call would be (one later in the call sees
-- what an earlier one wrote; Redis TIME is read once and shared), and the
-- reply is an array of m elements: decision j's array as above, or its own
-- error reply (a bad policy), which leaves the others standing. A call
-- whose layout does not add up is refused whole, before any write.
--
-- The script's top level runs on every call, so it builds no table it can
-- avoid: modules are plain functions, dispatched by name; one policy (the
-- common case) is answered straight from locals, several through two arrays
-- presized for two policies.

local function check(alg, key, now, limit, period, burst, cost)
  if alg == 'gcra' then
    return gcra_check(key, now, limit, period, burst, cost)
  elseif alg == 'token_bucket' then
    return token_bucket_check(key, now, limit, period, burst, cost)
  elseif alg == 'fixed_window' then
    return fixed_window_check(key, now, limit, period, burst, cost)
  elseif alg == 'sliding_window' then
    return sliding_window_check(key, now, limit, period, burst, cost)
  elseif alg == 'sliding_log' then
    return sliding_log_check(key, now, limit, period, burst, cost)
  end
  return nil -- unknown algorithm
end

local function commit(alg, key, now, cost, period, reset_after, x, y, z)
  if alg == 'gcra' then
    return gcra_commit(key, now, cost, period, reset_after, x)
  elseif alg == 'token_bucket' then
    return token_bucket_commit(key, now, cost, period, reset_after, x, y)
  elseif alg == 'fixed_window' then
    return fixed_window_commit(key, now, cost, period, reset_after, x)
  elseif alg == 'sliding_window' then
    return sliding_window_commit(key, now, cost, period, reset_after, x, y, z)
  end
  return sliding_log_commit(key, now, cost, period, reset_after)
end

-- bad_policy is the error reply for policy i; every policy is checked
-- (limit, period and burst numbers >= 1, algorithm known) before any write.
local function bad_policy(i)
  return redis.error_reply('ERR admit: bad policy ' .. i)
end

-- decide answers one decision whose backlog key is KEYS[k0], whose policy
-- keys follow it, whose now, cost, max_backlog and dry_run are ARGV[a0] to
-- ARGV[a0 + 3] and whose npol policies follow those (5 values each). It
-- returns the decision's reply array, or an error reply before any write.
local clock -- Redis TIME in µs, read at most once per call
local function decide(k0, a0, npol)
  local dry = ARGV[a0 + 3] == '1'
  local now = tonumber(ARGV[a0])
  if now == nil or now <= 0 then
    if clock == nil then
      local t = call('TIME')
      clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    now = clock
  end
  local cost = tonumber(ARGV[a0 + 1])
  local max_backlog = tonumber(ARGV[a0 + 2])
  if cost == nil or cost < 1 or max_backlog == nil or max_backlog < 0 then
    return redis.error_reply('ERR admit: cost must be >= 1 and max_backlog >= 0')
  end

  local admitted, violated, backlog = 1, 0, 0
  if max_backlog > 0 then
    backlog = tonumber(call('GET', KEYS[k0])) or 0
    if backlog + cost > max_backlog then
      admitted, violated = 0, -1
    end
  end

  if npol == 1 then
    local a = a0 + 4
    local alg, limit, period, burst, pcost = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
    if not (limit and period and burst and pcost) or limit < 1 or period < 1 or burst < 1 or pcost < 1 then
      return bad_policy(1)
    end
    local ok, cap, rem_now, reset_now, rem_after, reset_after, retry, x, y, z =
      check(alg, KEYS[k0 + 1], now, limit, period, burst, pcost)
    if ok == nil then
      return bad_policy(1)
    elseif not ok then
      if admitted == 1 then
        violated = 1
      end
      return { 0, violated, backlog, 0, cap, rem_now, retry, reset_now }
    end
    if admitted == 0 or dry then
      return { admitted, violated, backlog, 1, cap, rem_now, 0, reset_now }
    end
    commit(alg, KEYS[k0 + 1], now, pcost, period, reset_after, x, y, z)
    return { 1, 0, backlog, 1, cap, rem_after, 0, reset_after }
  end

  -- st holds 10 values per policy: ok, cap, rem_now, reset_now, rem_after,
  -- reset_after, retry and the commit's x, y, z.
  local st = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
  for i = 1, npol do
    local b = 10 * (i - 1)
    local a = a0 + 4 + 5 * (i - 1)
    local limit, period, burst, pcost = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
    if not (limit and period and burst and pcost) or limit < 1 or period < 1 or burst < 1 or pcost < 1 then
      return bad_policy(i)
    end
    st[b + 1], st[b + 2], st[b + 3], st[b + 4], st[b + 5], st[b + 6], st[b + 7], st[b + 8], st[b + 9], st[b + 10] =
      check(ARGV[a], KEYS[k0 + i], now, limit, period, burst, pcost)
    if st[b + 1] == nil then
      return bad_policy(i)
    end
    if admitted == 1 and not st[b + 1] then
      admitted, violated = 0, i
    end
  end

  local out = { admitted, violated, backlog }
  for i = 1, npol do
    local b, o = 10 * (i - 1), 5 * (i - 1) + 3
    local ok = st[b + 1]
    out[o + 1] = ok and 1 or 0
    out[o + 2] = st[b + 2]
    if admitted == 1 and not dry then
      local a = a0 + 4 + 5 * (i - 1)
      commit(ARGV[a], KEYS[k0 + i], now, tonumber(ARGV[a + 4]), tonumber(ARGV[a + 2]), st[b + 6], st[b + 8], st[b + 9], st[b + 10])
      out[o + 3], out[o + 4], out[o + 5] = st[b + 5], 0, st[b + 6]
    else
      local retry = st[b + 7]
      if ok then
        retry = 0
      end
      out[o + 3], out[o + 4], out[o + 5] = st[b + 3], retry, st[b + 4]
    end
  end
  return out
end

if ARGV[1] ~= 'many' then
  local npol = (#ARGV - 4) / 5
  if npol ~= floor(npol) or #KEYS ~= npol + 1 then
    return redis.error_reply('ERR admit: want 1 + n keys and 4 + 5n args')
  end
  return decide(1, 1, npol)
end

-- Many decisions: each is evaluated in turn, exactly as if it were its own
-- call (a later one sees what an earlier one wrote), under pcall so that one
-- decision's error is its own reply element and the others stand.
local m = tonumber(ARGV[2])
if m == nil or m < 1 then
  return redis.error_reply('ERR admit: many: want a decision count >= 1')
end
-- The layout is checked whole first, so a malformed call writes nothing.
local k, a = 1, 3
for j = 1, m do
  local npol = tonumber(ARGV[a])
  if npol == nil or npol < 0 or npol ~= floor(npol) then
    return redis.error_reply('ERR admit: many: decision ' .. j .. ' has no policy count')
  end
  k, a = k + 1 + npol, a + 5 + 5 * npol
end
if k ~= #KEYS + 1 or a ~= #ARGV + 1 then
  return redis.error_reply('ERR admit: many: want ' .. (k - 1) .. ' keys and ' .. (a - 1) ..
    ' args for ' .. m .. ' decisions, got ' .. #KEYS .. ' and ' .. #ARGV)
end
local res = {}
k, a = 1, 3
for j = 1, m do
  local npol = tonumber(ARGV[a])
  local ok, r = pcall(decide, k, a + 1, npol)
  if ok or (type(r) == 'table' and r.err) then
    res[j] = r
  else
    res[j] = redis.error_reply('ERR admit: ' .. tostring(r))
  end
  k, a = k + 1 + npol, a + 5 + 5 * npol
end
return res
