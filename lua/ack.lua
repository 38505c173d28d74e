-- ack.lua: finish a leased job (done, dropped or dead), Redis queue backend.
--
-- Removes the lease; when the lease was still held, pushes the dead-letter
-- record (if any) and lowers the tenant's backlog by the job's cost (never
-- below 0). When the lease was already gone (it expired and a reaper returned
-- the job to the queue) nothing else is written: the job will be delivered
-- again and finished by whoever holds it then, so the backlog is lowered
-- exactly once per job.
--
-- KEYS[1]  processing zset (keys.Processing)
-- KEYS[2]  leased hash (keys.Leased)
-- KEYS[3]  backlog counter (keys.Backlog)
-- KEYS[4]  dead-letter list (keys.DLQ)
-- ARGV[1]  lease member
-- ARGV[2]  job cost, integer >= 1
-- ARGV[3]  PEXPIRE of the backlog counter, ms (keys.BacklogTTL)
-- ARGV[4]  PEXPIRE of the dead-letter list, ms (keys.QueueTTL)
-- ARGV[5]  dead-letter record (JSON), or "" when the job is not dead
--
-- Returns 1 when the lease was held and the job is finished, 0 when the
-- lease was lost.

if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
if ARGV[5] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[5])
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
end
local left = redis.call('DECRBY', KEYS[3], ARGV[2])
if left < 0 then
  redis.call('SET', KEYS[3], 0)
end
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
