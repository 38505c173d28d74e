-- submit.lua: admission and enqueue in one call (Redis queue backend).
-- lua.Submit() runs it after the prelude admit_prelude.lua, the algorithm
-- modules, the decisions admit_decide.lua, job_state_final.lua and the
-- enqueue enqueue_jobs.lua (lua.SubmitFor after one algorithm module), so
-- one EVALSHA decides m requests exactly as admit.lua would (every policy
-- and the backlog gate, all or nothing) and enqueues each admitted one's
-- jobs exactly as enqueue.lua would (RPUSH, the backlog counter, each job's
-- state "queued" and its queued index). A request is all or nothing: its
-- policies' state, its list entries, its backlog and its job states are
-- written only when it is admitted; a refusal writes nothing. Because the
-- gate reads the backlog in the same script that raises it, it is exact
-- under concurrency: no two requests can both pass on the same room.
--
-- KEYS   admit.lua's KEYS for the m decisions; then per decision, in turn,
--        the keys of its enqueue in enqueue.lua's order: queue, backlog,
--        enqueue sequence, dispatched sequence, its n job states. All carry
--        the decision's tenant hash tag.
-- ARGV   admit.lua's ARGV for the m decisions (none a dry run); then per
--        decision, in turn: n (its jobs, >= 1), seen (1: a job's id may
--        have been recorded before, so the resent-job checks of enqueue.lua
--        run; 0: ids just made, they are skipped), then enqueue.lua's ARGV
--        for its n jobs (4 + 5n values).
--
-- Every argument is checked before the first write: a malformed layout is
-- an error reply for the whole call.
-- Returns admit.lua's flat reply with two more integers after each
-- decision's 3 + 5n: the queue's length and the backlog after its enqueue
-- (0, 0 when refused). A decision's error reply stays one element.

local err = admit_parse()
if err then
  return err
end
local ek, ea, en, es = {}, {}, {}, {}
local k, a = admit_k, admit_a
for j = 1, m do
  local n, seen = num(ARGV[a]), ARGV[a + 1]
  if n == nil or n < 1 or n ~= floor(n) or (seen ~= '0' and seen ~= '1') then
    return redis.error_reply('ERR submit: decision ' .. j .. ' has no job count or seen flag')
  end
  if ARGV[da[j] + 2] == '1' then
    return redis.error_reply('ERR submit: decision ' .. j .. ' is a dry run')
  end
  local msg = enqueue_check(a + 2, n)
  if msg then
    return redis.error_reply('ERR submit: decision ' .. j .. ': ' .. msg)
  end
  ek[j], ea[j], en[j], es[j] = k, a + 2, n, seen == '1'
  k, a = k + 4 + n, a + 6 + 5 * n
end
if k ~= #KEYS + 1 or a ~= #ARGV + 1 then
  return redis.error_reply('ERR submit: want ' .. (k - 1) .. ' keys and ' .. (a - 1) ..
    ' args for ' .. m .. ' decisions, got ' .. #KEYS .. ' and ' .. #ARGV)
end

-- The enqueues of the admitted decisions without seen ids are deferred and
-- grouped by queue (groups[queue key], in decision order; gorder holds the
-- queues in the order they first appear), then each group is written as one
-- (enqueue_group): m requests on one tenant cost one RPUSH, one INCRBY and
-- one sequence write, not m. The backlog gate of a later decision counts a
-- group's cost before it is written (bl_pending). A decision with seen ids
-- writes its tenant's group first and then enqueues on its own, so the
-- queue keeps the decisions' order; a call of one decision enqueues
-- straight away (no group to build). A Redis error in a group's write makes
-- each of its decisions one error element, as an error in a decision does.
local groups, gorder, failed, ep, ep0 = {}, {}, {}, {}, {}

local function flush(q)
  local g = groups[q]
  if not g then
    return
  end
  groups[q] = nil
  bl_pending[KEYS[ek[g[1]] + 1]] = nil
  local ok, len, backlog = pcall(enqueue_group, g, ek, ea, en)
  if not ok then
    local e = len
    if not (type(e) == 'table' and e.err) then
      e = redis.error_reply('ERR submit: ' .. tostring(e))
    end
    for x = 1, #g do
      failed[#failed + 1] = {ep0[g[x]], ep[g[x]] + 2, e}
    end
    return
  end
  for x = #g, 1, -1 do
    local j = g[x]
    res[ep[j]], res[ep[j] + 1] = len, backlog
    len, backlog = len - en[j], backlog - num(ARGV[ea[j] + 2])
  end
end

admit_run(function(j, p0, p)
  res[p], res[p + 1] = 0, 0
  if res[p0] == 1 then
    local q = KEYS[ek[j]]
    if m == 1 then
      res[p], res[p + 1] = enqueue_jobs(ek[j], ea[j], en[j], es[j])
    elseif es[j] then
      flush(q)
      res[p], res[p + 1] = enqueue_jobs(ek[j], ea[j], en[j], true)
    else
      local g = groups[q]
      if not g then
        g = {}
        groups[q] = g
        gorder[#gorder + 1] = q
      end
      g[#g + 1] = j
      ep[j], ep0[j] = p, p0
      local bk = KEYS[ek[j] + 1]
      bl_pending[bk] = (bl_pending[bk] or 0) + num(ARGV[ea[j] + 2])
    end
  end
  return p + 2
end)
for i = 1, #gorder do
  flush(gorder[i])
end
if #failed == 0 then
  return res
end
-- A failed group's decisions become one error element each.
table.sort(failed, function(x, y) return x[1] < y[1] end)
local out, f, i = {}, 1, 1
while i <= #res do
  local r = failed[f]
  if r and i == r[1] then
    out[#out + 1] = r[3]
    i, f = r[2], f + 1
  else
    out[#out + 1] = res[i]
    i = i + 1
  end
end
return out
