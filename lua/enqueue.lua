-- enqueue.lua: append one tenant's jobs to its queue, add their cost to its
-- backlog counter and record each job's state "queued" with its place in the
-- tenant's enqueue sequence, atomically (Redis queue backend). Each job's
-- id joins the tenant's queued index (keys.JobIndex(tenant, "queued"), score
-- its seq) and leaves the index of the state an older job under the same id
-- had (index_leave and job_index of job_state_final.lua). The work is
-- enqueue_jobs.lua's, which submit.lua shares; lua.Enqueue puts
-- job_state_final.lua and it first.
--
-- KEYS[1]   the tenant's queue list (keys.Queue); jobs are RPUSHed to its tail,
--           so consumers take the oldest job from its head
-- KEYS[2]   the tenant's backlog counter (keys.Backlog), in cost units
-- KEYS[3]   the tenant's enqueue sequence (keys.JobSeq)
-- KEYS[4]   the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[5..] one job-state hash (keys.JobState) per job, in the jobs' order
-- ARGV[1]   PEXPIRE of the queue in milliseconds (keys.QueueTTL), integer >= 1
-- ARGV[2]   PEXPIRE of the backlog counter in milliseconds (keys.BacklogTTL),
--           integer >= 1
-- ARGV[3]   total cost of the jobs, integer >= 1
-- ARGV[4]   PEXPIRE of the job states and sequences, ms (keys.JobStateTTL)
-- ARGV[5..4+n]      the n job envelopes (JSON), pushed in this order
-- ARGV[5+n..4+5n]   per job, in order: its type, its enqueued_at in unix ms, its
--                   cost (kept in the state hash for a purge's backlog count),
--                   its heartbeat interval in ms (0: not a heartbeat job)
--
-- Each job's state hash is replaced by {state=queued, type, attempt=0,
-- enqueued_at, updated_at=enqueued_at, seq}; seq continues the tenant's
-- sequence, from at least the dispatched sequence (so a sequence that
-- expired never starts behind the jobs already gone). A job whose state
-- hash holds its very enqueued_at already is this job written before (an
-- enqueue sent again after its outcome was unknown, queue.ErrUnknownOutcome):
-- it is skipped, neither pushed nor counted, and its state is left as it is.
--
-- Returns {queue_length, backlog}: the list's length and the counter's value
-- after the write (ARGV[3] is the cost of all the jobs; the counter rises by
-- the cost of those not skipped). Every argument is checked before the first write, so a bad
-- call writes nothing (Redis does not roll back a script that fails halfway).

local n = #KEYS - 4
if n < 1 or #ARGV < 5 then
  return redis.error_reply('ERR enqueue: no jobs')
end
local msg = enqueue_check(1, n)
if msg then
  return redis.error_reply('ERR enqueue: ' .. msg)
end
if #ARGV ~= 4 + 5 * n then
  return redis.error_reply('ERR enqueue: ' .. n .. ' job state keys but ' .. (#ARGV - 4) .. ' job arguments, want ' .. 5 * n)
end
local len, backlog = enqueue_jobs(1, 1, n, true)
return {len, backlog}
