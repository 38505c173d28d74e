-- admit_decide.lua: the admission decisions, a module of the admission
-- scripts admit.lua and submit.lua (lua.Admit, lua.AdmitFor, lua.Submit,
-- lua.SubmitFor put it after the prelude admit_prelude.lua and the algorithm
-- modules, and before the driver). Run on its own it only defines locals.
--
-- KEYS and ARGV: the admission layout of admit.lua's header, from KEYS[1] and
-- ARGV[1]; a driver may send more of its own after it (admit_k, admit_a).
-- It defines:
--   admit_parse()  parses and checks the admission layout (now, the policy
--                  table, every decision's cost, max_backlog and policy
--                  count) and reads Redis TIME when now is 0; returns an
--                  error reply when the layout is malformed, else nil, and
--                  sets m (the decisions), da (each decision's first ARGV
--                  index), admit_k and admit_a (the first KEYS and ARGV index
--                  after the admission part). It writes nothing.
--   admit_run(after)  decides the m decisions in order, writes the deferred
--                  keys (deferred_flush) and returns the flat reply of
--                  admit.lua. after, when not nil, is called as
--                  after(j, p0, p) once decision j was decided without an
--                  error (res[p0] is its admitted flag, its 3 + 5n integers
--                  are res[p0 .. p-1]); it may write more elements from
--                  res[p] and returns the next free position. A Redis error
--                  in after replaces the decision's elements with the error,
--                  as one in the decision does.

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

local now, m, np
-- The policy table: alg[p] is false for a policy that is not valid (an
-- unknown algorithm, or limit, period or burst not a number >= 1).
local alg, lim, per, bur = {}, {}, {}, {}
-- Decision j's keys start at KEYS[dk[j]], its part of ARGV at ARGV[da[j]];
-- its cost, max_backlog and policy count are parsed once, by admit_parse.
local dk, da, dc, dm, dn = {}, {}, {}, {}, {}
local admit_k, admit_a

local function admit_parse()
  now = num(ARGV[1])
  m, np = num(ARGV[2]), num(ARGV[3])
  if now == nil or now < 0 or m == nil or m < 1 or np == nil or np < 0 then
    return redis.error_reply('ERR admit: want now >= 0, m >= 1 decisions and P >= 0 policies')
  end
  if now == 0 then
    local t = call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  for p = 1, np do
    local a = 4 * p
    local l, d, b = num(ARGV[a + 1]), num(ARGV[a + 2]), num(ARGV[a + 3])
    local name = ARGV[a]
    if l and d and b and l >= 1 and d >= 1 and b >= 1 and (name == 'gcra' or name == 'token_bucket' or
        name == 'fixed_window' or name == 'sliding_window' or name == 'sliding_log') then
      alg[p], lim[p], per[p], bur[p] = name, l, d, b
    else
      alg[p] = false
    end
  end
  -- The layout is checked whole first, so a malformed call writes nothing.
  local k, a = 1, 4 + 4 * np
  for j = 1, m do
    local cost, maxb, n = num(ARGV[a]), num(ARGV[a + 1]), num(ARGV[a + 3])
    if cost == nil or maxb == nil or n == nil or n < 0 or n ~= floor(n) then
      return redis.error_reply('ERR admit: decision ' .. j .. ' has no cost, max_backlog or policy count')
    end
    dk[j], da[j], dc[j], dm[j], dn[j] = k, a, cost, maxb, n
    if maxb > 0 then
      k = k + 1
    end
    k, a = k + n, a + 4 + 2 * n
  end
  admit_k, admit_a = k, a
  return nil
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
    backlog = (tonumber(call('GET', KEYS[k0])) or 0) + (bl_pending[KEYS[k0]] or 0)
    k0 = k0 + 1
    if backlog + cost > max_backlog then
      admitted, violated = 0, -1
    end
  end
  if n == 1 then
    local p, pcost = num(ARGV[a0 + 4]), num(ARGV[a0 + 5])
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
    local p, pcost = num(ARGV[a0 + 2 + 2 * i]), num(ARGV[a0 + 3 + 2 * i])
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
local function admit_run(after)
  local j = 1
  local function run()
    while j <= m do
      local r = decide(j)
      if type(r) == 'number' then
        if after then
          r = after(j, pos, r)
        end
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
  deferred_flush()
  return res
end
