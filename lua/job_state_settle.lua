-- job_state_settle.lua: record how a delivery or a drop ended (Kafka queue
-- backend; the Redis backend does this inside ack.lua and lease_defer.lua).
--
-- The delivery leaves the tenant's deliveries in progress; the job's state
-- becomes ARGV[2] with updated_at (Redis TIME, ms), and its last error and
-- reason when not empty; a job dropped at the head of its lane (cancelled,
-- expired, poison) moves the tenant's dispatched sequence up to its seq (a
-- delivered job did that when its delivery started); a dead job raises the
-- tenant's DLQ counter. An older cancel marker (a string under KEYS[1]) is
-- left as it is. The hash is created when missing: on Kafka a job may
-- finish before the producer's post-ack write records it, which then keeps
-- this state (job_state_enqueue.lua).
--
-- KEYS[1]  the job's state hash (keys.JobState)
-- KEYS[2]  the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[3]  the tenant's deliveries in progress (keys.Delivering)
-- KEYS[4]  the tenant's dead-job counter (keys.DLQCount)
-- ARGV[1]  the delivery's member in KEYS[3] (queue.Claimed.Token)
-- ARGV[2]  the state: done, dead, cancelled, expired or retrying
-- ARGV[3]  the last delivery error, "" to keep the recorded one
-- ARGV[4]  why a dead job is dead, or ""
-- ARGV[5]  PEXPIRE of the state and sequence, ms (keys.JobStateTTL)
-- ARGV[6]  1 to add one to KEYS[4] (the job went to the dead-letter topic), else 0
-- ARGV[7]  PEXPIRE of KEYS[4], ms (keys.QueueTTL)
--
-- Returns 1.

redis.call('ZREM', KEYS[3], ARGV[1])
if ARGV[6] == '1' then
  redis.call('INCR', KEYS[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[7])
end
local sk, state, ttl = KEYS[1], ARGV[2], ARGV[5]
local t = redis.call('TIME')
local f = {'state', state, 'updated_at', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
if ARGV[3] ~= '' then f[#f + 1] = 'last_error'; f[#f + 1] = ARGV[3] end
if ARGV[4] ~= '' then f[#f + 1] = 'reason'; f[#f + 1] = ARGV[4] end
-- pcall: HSET fails (WRONGTYPE) only on the older string marker.
if type(redis.pcall('HSET', sk, unpack(f))) == 'table' then
  return 1
end
redis.call('PEXPIRE', sk, ttl)
if state == 'cancelled' or state == 'expired' or ARGV[4] == 'poison' then
  local seq = tonumber(redis.call('HGET', sk, 'seq'))
  if seq and seq > (tonumber(redis.call('GET', KEYS[2])) or 0) then
    redis.call('SET', KEYS[2], seq, 'PX', ttl)
  end
end
return 1
