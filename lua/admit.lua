-- admit.lua: the admission driver. lua.Admit() runs it concatenated after
-- the prelude admit_prelude.lua and the algorithm modules fixed_window.lua,
-- sliding_window.lua, gcra.lua, token_bucket.lua and sliding_log.lua (and
-- lua.AdmitFor after one module), so one EVALSHA decides one or many
-- requests, each against its tenant's backlog gate and every one of its
-- policies at once, all or nothing: a request's policies' new state is
-- written only when its gate and every policy admit; a refusal writes
-- nothing at all.
--
-- One call carries m decisions (a lone request is m = 1; the Admitter's
-- batches put every concurrent request of a standalone Redis, or of one
-- tenant on a cluster, in one call). The distinct policies of the call are
-- listed once and every decision refers to them by number, so a batch of
-- tenants on one plan sends and parses each policy once.
--
-- ARGV[1]    now, unix µs, for every decision; 0 reads Redis TIME once
--            (TIME[1]*1000000 + TIME[2])
-- ARGV[2]    m, the number of decisions, >= 1
-- ARGV[3]    P, the number of distinct policies, >= 0
-- ARGV[4p .. 4p+3]  policy p = 1..P: algorithm (fixed_window,
--            sliding_window, gcra, token_bucket or sliding_log), limit
--            (units per period), period (µs), burst (units; used by gcra
--            and token_bucket)
-- then per decision, in turn:
--            cost, integer units >= 1: what the backlog gate counts
--            max_backlog, integer units; 0 = no gate. The gate refuses when
--              backlog + cost > max_backlog (admits while it stays <= max)
--            dry_run: 1 decides and reports but writes nothing (the state
--              headers of an answer that was not admitted), else 0
--            n, the decision's number of policies
--            n pairs: policy number p (1..P), and the cost charged to it
--              (>= 1; a batch mixing job types charges each type's policy
--              only its own jobs)
-- KEYS       per decision, in turn: the tenant's backlog counter
--            (keys.Backlog, read only), only when its max_backlog > 0; then
--            the state key of each of its n policies (keys.Admission). A
--            decision's keys carry its tenant's hash tag (one cluster slot).
--
-- Returns one flat array: for each decision in turn either its own error
-- reply, one element (it names a bad policy by the decision's policy index;
-- the others stand), or its 3 + 5n integers (one array for the whole call:
-- Redis converts each nested table of a reply at a cost larger than a
-- decision's own work):
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
-- The decisions are evaluated in order, each exactly as its own call would
-- be: a later one sees what an earlier one wrote. A call whose layout does
-- not add up is refused whole with an error, before any write.
--
-- The script's top level runs on every call, so it builds no table it can
-- avoid: modules are plain functions, dispatched by name; a one-policy
-- decision (the common case) is answered straight from locals, several
-- through one array.

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

-- bad_policy is decision-level error reply for its policy i.
local function bad_policy(i)
  return redis.error_reply('ERR admit: bad policy ' .. i)
end

local now = tonumber(ARGV[1])
local m, np = tonumber(ARGV[2]), tonumber(ARGV[3])
if now == nil or now < 0 or m == nil or m < 1 or np == nil or np < 0 then
  return redis.error_reply('ERR admit: want now >= 0, m >= 1 decisions and P >= 0 policies')
end
if now == 0 then
  local t = call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- The policy table: alg[p] is false for a policy that is not valid (an
-- unknown algorithm, or limit, period or burst not a number >= 1).
local alg, lim, per, bur = {}, {}, {}, {}
for p = 1, np do
  local a = 4 * p
  local l, d, b = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local name = ARGV[a]
  if l and d and b and l >= 1 and d >= 1 and b >= 1 and (name == 'gcra' or name == 'token_bucket' or
      name == 'fixed_window' or name == 'sliding_window' or name == 'sliding_log') then
    alg[p], lim[p], per[p], bur[p] = name, l, d, b
  else
    alg[p] = false
  end
end

-- The layout is checked whole first, so a malformed call writes nothing.
-- Decision j's keys start at KEYS[dk[j]], its part of ARGV at ARGV[da[j]];
-- its cost, max_backlog and policy count are parsed here once.
local dk, da, dc, dm, dn = {}, {}, {}, {}, {}
local k, a = 1, 4 + 4 * np
for j = 1, m do
  local cost, maxb, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 3])
  if cost == nil or maxb == nil or n == nil or n < 0 or n ~= floor(n) then
    return redis.error_reply('ERR admit: decision ' .. j .. ' has no cost, max_backlog or policy count')
  end
  dk[j], da[j], dc[j], dm[j], dn[j] = k, a, cost, maxb, n
  if maxb > 0 then
    k = k + 1
  end
  k, a = k + n, a + 4 + 2 * n
end
if k ~= #KEYS + 1 or a ~= #ARGV + 1 then
  return redis.error_reply('ERR admit: want ' .. (k - 1) .. ' keys and ' .. (a - 1) ..
    ' args for ' .. m .. ' decisions, got ' .. #KEYS .. ' and ' .. #ARGV)
end

-- res is the reply: every decision's integers in turn, written in place
-- from res[pos] (a table per decision would cost Redis more to convert
-- than the decision itself).
local res, pos = {}, 1
-- st holds 12 values per policy when n > 1, reused by every decision: ok,
-- cap, rem_now, reset_now, rem_after, reset_after, retry, the commit's x, y,
-- z, and the policy's number and cost.
local st = {}

-- decide answers decision j: it writes its 3 + 5n integers to res from
-- res[pos] and returns the next free position, or returns an error reply
-- before any write.
local function decide(j)
  local k0, a0, cost, max_backlog, n = dk[j], da[j], dc[j], dm[j], dn[j]
  local dry = ARGV[a0 + 2] == '1'
  if cost < 1 or max_backlog < 0 then
    return redis.error_reply('ERR admit: cost must be >= 1 and max_backlog >= 0')
  end
  local admitted, violated, backlog = 1, 0, 0
  if max_backlog > 0 then
    backlog = tonumber(call('GET', KEYS[k0])) or 0
    k0 = k0 + 1
    if backlog + cost > max_backlog then
      admitted, violated = 0, -1
    end
  end
  if n == 1 then
    local p, pcost = tonumber(ARGV[a0 + 4]), tonumber(ARGV[a0 + 5])
    if not (p and pcost and alg[p]) or pcost < 1 then
      return bad_policy(1)
    end
    local name, period = alg[p], per[p]
    local ok, cap, rem_now, reset_now, rem_after, reset_after, retry, x, y, z =
      check(name, KEYS[k0], now, lim[p], period, bur[p], pcost)
    if not ok then
      if admitted == 1 then
        violated = 1
      end
      res[pos], res[pos + 1], res[pos + 2], res[pos + 3], res[pos + 4], res[pos + 5], res[pos + 6], res[pos + 7] =
        0, violated, backlog, 0, cap, rem_now, retry, reset_now
      return pos + 8
    end
    if admitted == 0 or dry then
      res[pos], res[pos + 1], res[pos + 2], res[pos + 3], res[pos + 4], res[pos + 5], res[pos + 6], res[pos + 7] =
        admitted, violated, backlog, 1, cap, rem_now, 0, reset_now
      return pos + 8
    end
    commit(name, KEYS[k0], now, pcost, period, reset_after, x, y, z)
    res[pos], res[pos + 1], res[pos + 2], res[pos + 3], res[pos + 4], res[pos + 5], res[pos + 6], res[pos + 7] =
      1, 0, backlog, 1, cap, rem_after, 0, reset_after
    return pos + 8
  end

  -- Every policy is checked, and its number and cost kept, before any is
  -- read.
  for i = 1, n do
    local b = 12 * (i - 1)
    local p, pcost = tonumber(ARGV[a0 + 2 + 2 * i]), tonumber(ARGV[a0 + 3 + 2 * i])
    if not (p and pcost and alg[p]) or pcost < 1 then
      return bad_policy(i)
    end
    st[b + 11], st[b + 12] = p, pcost
  end
  for i = 1, n do
    local b = 12 * (i - 1)
    local p, pcost = st[b + 11], st[b + 12]
    st[b + 1], st[b + 2], st[b + 3], st[b + 4], st[b + 5], st[b + 6], st[b + 7], st[b + 8], st[b + 9], st[b + 10] =
      check(alg[p], KEYS[k0 + i - 1], now, lim[p], per[p], bur[p], pcost)
    if admitted == 1 and not st[b + 1] then
      admitted, violated = 0, i
    end
  end
  res[pos], res[pos + 1], res[pos + 2] = admitted, violated, backlog
  for i = 1, n do
    local b, o = 12 * (i - 1), pos + 5 * (i - 1) + 2
    local ok = st[b + 1]
    res[o + 1] = ok and 1 or 0
    res[o + 2] = st[b + 2]
    if admitted == 1 and not dry then
      local p = st[b + 11]
      commit(alg[p], KEYS[k0 + i - 1], now, st[b + 12], per[p], st[b + 6], st[b + 8], st[b + 9], st[b + 10])
      res[o + 3], res[o + 4], res[o + 5] = st[b + 5], 0, st[b + 6]
    else
      local retry = st[b + 7]
      if ok then
        retry = 0
      end
      res[o + 3], res[o + 4], res[o + 5] = st[b + 3], retry, st[b + 4]
    end
  end
  return pos + 3 + 5 * n
end

-- The decisions run under one pcall, so a Redis error in one (a key of the
-- wrong type) is its own reply element and the others stand: what it had
-- written to res is dropped, its error takes its place, and the run goes on
-- after it.
local j = 1
local function run()
  while j <= m do
    local r = decide(j)
    if type(r) == 'number' then
      pos = r
    else
      res[pos] = r -- a bad policy, refused before any write
      pos = pos + 1
    end
    j = j + 1
  end
end
while true do
  local ok, err = pcall(run)
  if ok then
    break
  end
  for x = #res, pos, -1 do
    res[x] = nil
  end
  if not (type(err) == 'table' and err.err) then
    err = redis.error_reply('ERR admit: ' .. tostring(err))
  end
  res[pos] = err
  pos, j = pos + 1, j + 1
end
return res
