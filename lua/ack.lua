-- ack.lua: finish n leased jobs of one tenant (done, dropped or dead), Redis
-- queue backend, in one call: the finishes that arrive together share it
-- (queue/redisq's finish group), so the tenant-wide writes (the leases, the
-- backlog, the job indexes) are one command each for all of them.
--
-- For each job: removes the lease; when the lease was still held, writes the
-- dead letter (if any: dead_add of dead_letter.lua on KEYS[4] and KEYS[7]),
-- lowers the tenant's backlog by the job's cost (never below 0; not for a
-- job a purge cancelled, whose cost the purge took off) and records the
-- job's final state. When the lease was already gone (it expired and a
-- reaper returned the job to the queue) nothing else is written, except a
-- delivered job's state done: the copy the reaper returned is then settled
-- unsent by whoever claims it (claim.lua's done_ms,
-- queue.Claimed.Duplicate), and lowers the backlog, so the backlog is
-- lowered exactly once per job. A member given twice is held the first
-- time only.
--
-- The state record (package jobstate) is record_final of
-- job_state_final.lua (lua.Include puts it and dead_letter.lua first) on the
-- job's hash and the tenant's dispatched sequence KEYS[5], with one batch
-- (batch_new) for all the jobs: one TIME, and the index moves made together
-- at the end (batch_flush). Each job id appears at most once per call.
--
-- KEYS[1]    processing zset (keys.Processing)
-- KEYS[2]    leased hash (keys.Leased)
-- KEYS[3]    backlog counter (keys.Backlog)
-- KEYS[4]    the tenant's dead index (keys.JobIndex(t, "dead"))
-- KEYS[5]    the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[6]    the tenant's deliveries in progress (keys.Delivering)
-- KEYS[7]    the tenant's dead letters (keys.DeadRecords)
-- KEYS[7+i]  job i's state hash (keys.JobState)
-- ARGV[1]    PEXPIRE of the backlog counter, ms (keys.BacklogTTL)
-- ARGV[2]    PEXPIRE of the dead index and letters, ms (keys.DeadTTL); also
--            their age bound
-- ARGV[3]    PEXPIRE of the state hashes and sequence, ms (keys.JobStateTTL)
-- ARGV[4]    most dead letters kept (keys.DeadMaxJobs)
-- ARGV[5]    "1" on the caller's first finish of the tenant in a wall second
--            (keys.Refresh): the backlog's TTL is refreshed (otherwise only
--            when this call set the counter, which clears a TTL, or created
--            it) and the done index is trimmed
-- ARGV[6]    n, the number of jobs, 1 to 1000
-- then 8 arguments per job i, from ARGV[7 + 8(i-1)]:
--   +0  lease member (also the delivery's member in KEYS[6])
--   +1  job cost, integer >= 1; the n costs sum to at most 2^53 - 1
--       (checked before any write: a refused call writes nothing)
--   +2  dead-letter record (JSON), or "" when the job is not dead
--   +3  the state to record: done, dead, cancelled, expired; "" records
--       nothing (the job's state hash is then not touched)
--   +4  the last delivery error, "" to keep the recorded one
--   +5  why a dead job is dead, or ""
--   +6  with a dead letter: when the job died, unix ms (0: Redis TIME)
--   +7  "1" when the delivery in progress is the lease itself (take.lua
--       started it: queue.Claimed.InLease): KEYS[6] is not touched
-- A dead letter's job id is the one at the end of its state key.
--
-- Returns an array of n integers: 1 when job i's lease was held and it is
-- finished, 0 when its lease was lost.

local n = tonumber(ARGV[6])
if n == nil or n < 1 or n > 1000 or n ~= math.floor(n) or #ARGV ~= 6 + 8 * n or #KEYS ~= 7 + n then
  return redis.error_reply('ERR ack: want n in 1..1000 jobs, 7 + n keys and 6 + 8n arguments')
end
local _, bad = costs_sum(7, 8, n, 1)
if bad then return redis.error_reply('ERR ack: ' .. bad) end
local tick, state_ttl = ARGV[5], ARGV[3]
local B = batch_new()

local members, delivering, seen = {}, {}, {}
for i = 1, n do
  local a = 7 + 8 * (i - 1)
  members[i] = ARGV[a]
  if ARGV[a + 3] ~= '' and ARGV[a + 7] ~= '1' then
    delivering[#delivering + 1] = ARGV[a]
  end
end
if #delivering > 0 then
  redis.call('ZREM', KEYS[6], unpack(delivering))
end
-- Which leases are held: one ZREM alone; for more, one ZMSCORE, then one
-- ZREM of those held.
local out = {}
if n == 1 then
  out[1] = redis.call('ZREM', KEYS[1], members[1])
else
  local scores = redis.call('ZMSCORE', KEYS[1], unpack(members))
  local held = {}
  for i = 1, n do
    local m = members[i]
    out[i] = (scores[i] and not seen[m]) and 1 or 0
    if out[i] == 1 then held[#held + 1] = m end
    seen[m] = true
  end
  if #held > 0 then
    redis.call('ZREM', KEYS[1], unpack(held))
  end
end
redis.call('HDEL', KEYS[2], unpack(members))

local lower = 0
for i = 1, n do
  local a = 7 + 8 * (i - 1)
  local sk, state = KEYS[7 + i], ARGV[a + 3]
  local record = state ~= ''
  if out[i] == 0 then
    if record and state == 'done' then
      record_final(sk, KEYS[5], state, ARGV[a + 4], ARGV[a + 5], state_ttl, nil, tick, nil, B)
    end
  else
    -- One read of the state for the purge check and record_final's index
    -- move (pcall: HMGET fails (WRONGTYPE) only on the older string marker).
    local pre = nil
    if record then pre = redis.pcall('HMGET', sk, 'state', 'seq', 'reason') end
    if ARGV[a + 2] ~= '' then
      dead_add(KEYS[4], KEYS[7], job_id(sk) or '?', ARGV[a + 2], ARGV[a + 6], ARGV[4], ARGV[2])
    end
    -- A job a purge cancelled left the backlog then (purge.lua).
    if not (pre and not pre['err'] and pre[3] == 'purged') then
      lower = lower + tonumber(ARGV[a + 1])
    end
    if record then
      record_final(sk, KEYS[5], state, ARGV[a + 4], ARGV[a + 5], state_ttl, nil, tick, pre, B)
    end
  end
end
if lower > 0 then
  -- A counter DECRBY creates is below 0, and the SET clears a TTL: both
  -- refresh it; an existing counter keeps its TTL but once a second.
  local left = redis.call('DECRBY', KEYS[3], lower)
  if left < 0 then
    redis.call('SET', KEYS[3], 0)
  end
  if left < 0 or tick == '1' then
    redis.call('PEXPIRE', KEYS[3], ARGV[1])
  end
end
batch_flush(B)
return out
