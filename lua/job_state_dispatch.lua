-- job_state_dispatch.lua: a drainer starts delivering a job (both queue
-- backends).
--
-- Unless the job was cancelled meanwhile (DELETE /v1/jobs/{id} after the
-- claim, while the job waited for its outflow slot), or this very job (its
-- recorded enqueued_at is ARGV[7]: the producer's, else the
-- start_enqueued_at an earlier start wrote before the producer's post-ack
-- write landed) is done already (another copy was delivered meanwhile) or
-- dead (its dead letter written) or
-- under way from a copy in another Kafka partition (in_flight or retrying,
-- started from a partition other than ARGV[8]), in one step:
--   - its state becomes in_flight with the attempt number and updated_at
--     (the hash is created when missing: on Kafka the producer's post-ack
--     write may come later, and keeps this state; until it lands, the
--     envelope's enqueued_at goes to start_enqueued_at, so a later copy
--     finds the job done; ARGV[8], when not "", goes to start_part); the
--     attempt number is
--     the recorded one plus 1, at least ARGV[1], so it grows on every start
--     of the job whatever ended the one before (a crash, a lost lease, a
--     revoke), while the enqueue (and a redrive's) records 0; a recorded
--     attempt of another life (another enqueued_at, or a dead state without
--     one: a redrive racing its post-ack write on Kafka) does not count;
--   - the tenant's dispatched sequence rises to the job's seq, so the jobs
--     behind it move up (queue positions, package jobstate);
--   - the delivery joins the tenant's deliveries in progress until now +
--     lease (the drainer's lease keeper pushes the deadline on);
--   - its id moves to the tenant's in_flight index (keys.JobIndex, score
--     now) from the index of the state it leaves (index_move of
--     job_state_final.lua, which lua.Include puts first; the copy check,
--     the attempt rule and the start's write are its life_copy,
--     life_attempts and start_write).
-- The job's cost joins the tenant's outflow (keys.Outflow) from the
-- drainer, which counts it in memory and flushes once a second with
-- outflow_add.lua; that script also drops deliveries past their deadline.
-- A cancelled job, or an older cancel marker (the string "cancelled"), is
-- left as it is.
--
-- KEYS[1]  the job's state hash (keys.JobState)
-- KEYS[2]  the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[3]  the tenant's deliveries in progress (keys.Delivering)
-- ARGV[1]  the least attempt number (the envelope's attempts + 1)
-- ARGV[2]  the delivery's member in KEYS[3] (queue.Claimed.Token)
-- ARGV[3]  lease, ms
-- ARGV[4]  PEXPIRE of the state and sequence, ms (keys.JobStateTTL)
-- ARGV[5]  PEXPIRE of the deliveries set, ms (keys.QueueTTL)
-- ARGV[6]  now, unix ms; "0" reads Redis TIME
-- ARGV[7]  the envelope's enqueued_at, unix ms ("0": not known, no check)
-- ARGV[8]  the partition the job's Kafka record was read from
--          (queue.Claimed.Source); "" or absent for the Redis backend
--
-- Returns the delivery's attempt number (>= 1, Sluice-Attempt) when it may
-- start, 0 when the job was cancelled, -1 when it is done already or under
-- way from a copy in another partition (nothing is written then).

local now = tonumber(ARGV[6])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local sk, ttl = KEYS[1], ARGV[4]

-- pcall: HMGET fails (WRONGTYPE) only on the older string marker.
local attempt = tonumber(ARGV[1]) or 1
local part = ARGV[8] or ''
local st = redis.pcall('HMGET', sk, 'state', 'seq', 'attempt', 'enqueued_at', 'start_enqueued_at', 'start_part')
if st['err'] then
  if redis.call('GET', sk) == 'cancelled' then return 0 end
else
  if st[1] == 'cancelled' then return 0 end
  if life_copy(st[1], st[4], st[5], st[6], part, ARGV[7]) then return -1 end
  -- The recorded attempt counts only for this life of the job
  -- (life_attempts of job_state_final.lua).
  if life_attempts(st[1], st[4], st[5], ARGV[7]) then attempt = math.max((tonumber(st[3]) or 0) + 1, attempt) end
  local id = job_id(sk)
  if id then index_move(sk, id, 'in_flight', now) end
  start_write(sk, attempt, now, st[4], ARGV[7], part)
  redis.call('PEXPIRE', sk, ttl)
  local seq = tonumber(st[2])
  if seq and seq > (tonumber(redis.call('GET', KEYS[2])) or 0) then
    redis.call('SET', KEYS[2], seq, 'PX', ttl)
  end
end

redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return attempt
