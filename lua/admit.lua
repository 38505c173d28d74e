-- admit.lua: the admission driver. lua.Admit() runs it concatenated after
-- the prelude admit_prelude.lua, the algorithm modules fixed_window.lua,
-- sliding_window.lua, gcra.lua, token_bucket.lua and sliding_log.lua (and
-- lua.AdmitFor after one module) and the decisions admit_decide.lua (which
-- submit.lua shares), so one EVALSHA decides one or many
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

local err = admit_parse()
if err then
  return err
end
if admit_k ~= #KEYS + 1 or admit_a ~= #ARGV + 1 then
  return redis.error_reply('ERR admit: want ' .. (admit_k - 1) .. ' keys and ' .. (admit_a - 1) ..
    ' args for ' .. m .. ' decisions, got ' .. #KEYS .. ' and ' .. #ARGV)
end
return admit_run(nil)
