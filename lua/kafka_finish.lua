-- kafka_finish.lua: a Kafka consumer's Finish of n jobs of one tenant in one
-- call (Kafka queue backend; docs/perf.md 2.3, lever L2, and step 26): the
-- finishes that arrive together share it (queue/kafkaq's finish Batcher),
-- so the tenant-wide writes (the backlog, the deliveries in progress, the
-- job indexes) are one command each for all of them. lua.Include puts
-- job_state_final.lua, dead_letter.lua and backlog_lower.lua first.
--
-- For each job, in order: its state hash is read once (state, seq, reason
-- and fin, before any write). A job whose fin is its record's identity
-- (below) was finished from this very record before: a finish whose reply
-- was lost sent again (queue/kafkaq holds such a finish, heldfinish.go),
-- or the record handed out again after a revoke and finished by its next
-- owner; it lowers nothing and adds no dead letter, so one record lowers
-- the backlog once, but its delivery still leaves the deliveries in
-- progress, and a start its next owner recorded (state in_flight) still
-- gets its final state. Another copy of the job (another record) is
-- finished as before. Otherwise its cost lowers the tenant's backlog unless
-- the job was purged (reason "purged"); and unless its state argument is
-- "" (a duplicate: a copy of a job delivered already, whose state stays
-- done and which only lowers the backlog) the delivery leaves the
-- deliveries in progress, a dead job's letter joins the dead index and
-- letters (dead_add), and the state becomes the one given (record_final,
-- with one batch for all the jobs: batch_new, batch_flush; the hash is
-- created when missing: on Kafka a job may finish before the producer's
-- post-ack write records it, which then keeps this state,
-- job_state_enqueue.lua), with fin set to the record; a duplicate sets
-- fin on the hash when it exists (a duplicate whose hash has expired
-- meanwhile is not marked: sent twice, it lowers twice). Then backlog_lower lowers the counter KEYS[5] by
-- the sum, never below 0 (the rest owed in KEYS[6], paid by
-- backlog_raise.lua), its TTL refreshed on ARGV[4] "1" or when the counter
-- was created or reset. Each job id appears at most once per call.
--
-- KEYS[1]    the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[2]    the tenant's deliveries in progress (keys.Delivering)
-- KEYS[3]    the tenant's dead index (keys.JobIndex(t, "dead"))
-- KEYS[4]    the tenant's dead letters (keys.DeadRecords)
-- KEYS[5]    the tenant's backlog counter (keys.Backlog)
-- KEYS[6]    the tenant's owed count (keys.BacklogOwed)
-- KEYS[6+i]  job i's state hash (keys.JobState)
-- ARGV[1]    PEXPIRE of the state hashes and sequence, ms (keys.JobStateTTL)
-- ARGV[2]    PEXPIRE of KEYS[3] and KEYS[4], ms (keys.DeadTTL); also their
--            age bound
-- ARGV[3]    most dead letters kept (keys.DeadMaxJobs)
-- ARGV[4]    "1" on the caller's first finish of the tenant in a wall second
--            (keys.Refresh): the backlog's TTL is refreshed and the done
--            index trimmed
-- ARGV[5]    PEXPIRE of the backlog counter, ms (keys.BacklogTTL)
-- ARGV[6]    PEXPIRE of the owed count, ms (keys.BacklogOwedTTL)
-- ARGV[7]    n, the number of jobs, 1 to 1000
-- then 8 arguments per job i, from ARGV[8 + 8(i-1)]:
--   +0  the delivery's member in KEYS[2] (queue.Claimed.Token)
--   +1  the state: done, dead, cancelled or expired; "" for a duplicate
--   +2  the last delivery error, "" to keep the recorded one
--   +3  why a dead job is dead, or ""
--   +4  the dead letter (JSON) of a dead job, else ""
--   +5  with a dead letter: when the job died, unix ms (0: Redis TIME)
--   +6  job cost, integer >= 1; the n costs sum to at most 2^53 - 1
--       (checked before any write: a refused call writes nothing)
--   +7  the record's identity ("<topic>/<partition>@<offset>"), the fin
--       mark; ""
--       marks nothing and skips nothing
-- A dead letter's job id is the one at the end of its state key.
--
-- Returns the backlog counter after the decrement (>= 0), or as it is when
-- every job was purged.

local n = tonumber(ARGV[7])
if n == nil or n < 1 or n > 1000 or n ~= math.floor(n) or #ARGV ~= 7 + 8 * n or #KEYS ~= 6 + n then
  return redis.error_reply('ERR kafka_finish: want n in 1..1000 jobs, 6 + n keys and 7 + 8n arguments')
end
local _, bad = costs_sum(8, 8, n, 6)
if bad then return redis.error_reply('ERR kafka_finish: ' .. bad) end
local tick, state_ttl = ARGV[4], ARGV[1]
local B = batch_new()
local lower, delivering = 0, {}
for i = 1, n do
  local a = 8 + 8 * (i - 1)
  local sk, state, member, fin = KEYS[6 + i], ARGV[a + 1], ARGV[a], ARGV[a + 7]
  -- pcall: HMGET fails (WRONGTYPE) only on the older string marker.
  local pre = redis.pcall('HMGET', sk, 'state', 'seq', 'reason', 'fin')
  local again = not pre['err'] and fin ~= '' and pre[4] == fin
  if not again and (pre['err'] or pre[3] ~= 'purged') then
    lower = lower + tonumber(ARGV[a + 6])
  end
  if state ~= '' then
    delivering[#delivering + 1] = member
    if not again and ARGV[a + 4] ~= '' then
      dead_add(KEYS[3], KEYS[4], job_id(sk) or '?', ARGV[a + 4], ARGV[a + 5], ARGV[3], ARGV[2])
    end
    if not again or pre[1] == 'in_flight' then
      record_final(sk, KEYS[1], state, ARGV[a + 2], ARGV[a + 3], state_ttl, nil, tick, pre, B, fin ~= '' and {'fin', fin} or nil)
    end
  elseif not again and not pre['err'] and pre[1] and fin ~= '' then
    redis.call('HSET', sk, 'fin', fin)
  end
end
if #delivering > 0 then
  redis.call('ZREM', KEYS[2], unpack(delivering))
end
batch_flush(B)
if lower == 0 then
  return tonumber(redis.call('GET', KEYS[5])) or 0
end
return backlog_lower(KEYS[5], nil, lower, ARGV[5], tick, KEYS[6], ARGV[6])
