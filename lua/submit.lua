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
  local n, seen = tonumber(ARGV[a]), ARGV[a + 1]
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

return admit_run(function(j, p0, p)
  if res[p0] == 1 then
    res[p], res[p + 1] = enqueue_jobs(ek[j], ea[j], en[j], es[j])
  else
    res[p], res[p + 1] = 0, 0
  end
  return p + 2
end)
