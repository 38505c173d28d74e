-- ack.lua: finish a leased job (done, dropped or dead), Redis queue backend.
--
-- Removes the lease; when the lease was still held, writes the dead letter
-- (if any: dead_add of dead_letter.lua on KEYS[4] and KEYS[8]), lowers the
-- tenant's backlog by the job's cost (never below 0; not for a job a purge
-- cancelled, whose cost the purge took off) and records the job's
-- final state. When the lease was already
-- gone (it expired and a reaper returned the job to the queue) nothing else
-- is written, except a delivered job's state done: the copy the reaper
-- returned is then settled unsent by whoever claims it (claim.lua's done_ms,
-- queue.Claimed.Duplicate), and lowers the backlog, so the backlog is
-- lowered exactly once per job.
--
-- The state record (package jobstate) is record_final of
-- job_state_final.lua (lua.Include puts it and dead_letter.lua first) on
-- the job's hash KEYS[5] and the tenant's dispatched sequence KEYS[6].
--
-- KEYS[1]  processing zset (keys.Processing)
-- KEYS[2]  leased hash (keys.Leased)
-- KEYS[3]  backlog counter (keys.Backlog)
-- KEYS[4]  the tenant's dead index (keys.JobIndex(t, "dead"))
-- KEYS[5]  optional: the job's state hash (keys.JobState); without KEYS[5..7]
--          no state is recorded
-- KEYS[6]  optional: the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[7]  optional: the tenant's deliveries in progress (keys.Delivering)
-- KEYS[8]  with a dead letter: the tenant's dead letters (keys.DeadRecords)
-- ARGV[1]  lease member (also the delivery's member in KEYS[7])
-- ARGV[2]  job cost, integer >= 1
-- ARGV[3]  PEXPIRE of the backlog counter, ms (keys.BacklogTTL)
-- ARGV[4]  PEXPIRE of the dead index and letters, ms (keys.DeadTTL); also
--          their age bound
-- ARGV[5]  dead-letter record (JSON), or "" when the job is not dead
-- ARGV[6]  with KEYS[5]: the state to record: done, dead, cancelled, expired
-- ARGV[7]  with KEYS[5]: the last delivery error, "" to keep the recorded one
-- ARGV[8]  with KEYS[5]: why a dead job is dead, or ""
-- ARGV[9]  with KEYS[5]: PEXPIRE of the state and sequence, ms (keys.JobStateTTL)
-- ARGV[10] with a dead letter: the job id
-- ARGV[11] with a dead letter: when the job died, unix ms (0: Redis TIME)
-- ARGV[12] with a dead letter: most dead letters kept (keys.DeadMaxJobs)
-- ARGV[13] "1" on the caller's first finish of the tenant in a wall second
--          (keys.Refresh): the backlog's TTL is refreshed (otherwise only
--          when this call set the counter, which clears a TTL, or created
--          it) and, with KEYS[5], the done index is trimmed
-- ARGV[14] "1" when the delivery in progress is the lease itself (take.lua
--          started it: queue.Claimed.InLease): KEYS[7] is not touched
--
-- Returns 1 when the lease was held and the job is finished, 0 when the
-- lease was lost.

local record = #KEYS >= 7
if record and ARGV[14] ~= '1' then
  redis.call('ZREM', KEYS[7], ARGV[1])
end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  if record and ARGV[6] == 'done' then
    record_final(KEYS[5], KEYS[6], ARGV[6], ARGV[7], ARGV[8], ARGV[9], nil, ARGV[13])
  end
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
-- One read of the state for the purge check and record_final's index move
-- (pcall: HMGET fails (WRONGTYPE) only on the older string marker).
local pre = nil
if record then pre = redis.pcall('HMGET', KEYS[5], 'state', 'seq', 'reason') end
if ARGV[5] ~= '' then
  dead_add(KEYS[4], KEYS[8], ARGV[10], ARGV[5], ARGV[11], ARGV[12], ARGV[4])
end
-- A job a purge cancelled left the backlog then (purge.lua).
if not (pre and not pre['err'] and pre[3] == 'purged') then
  -- A counter DECRBY creates is below 0, and the SET clears a TTL: both
  -- refresh it; an existing counter keeps its TTL but once a second.
  local left = redis.call('DECRBY', KEYS[3], ARGV[2])
  if left < 0 then
    redis.call('SET', KEYS[3], 0)
  end
  if left < 0 or ARGV[13] == '1' then
    redis.call('PEXPIRE', KEYS[3], ARGV[3])
  end
end
if not record then
  return 1
end

record_final(KEYS[5], KEYS[6], ARGV[6], ARGV[7], ARGV[8], ARGV[9], nil, ARGV[13], pre)
return 1
