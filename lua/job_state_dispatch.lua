-- job_state_dispatch.lua: a drainer starts delivering a job (both queue
-- backends). Runs with job_state_lib.lua prepended (jobstate.Script).
--
-- Unless the job was cancelled meanwhile (DELETE /v1/jobs/{id} after the
-- claim, while the job waited for its outflow slot), in one step:
--   - its state becomes in_flight with the attempt number;
--   - the tenant's dispatched sequence passes the job's seq (queue positions);
--   - the delivery joins the tenant's deliveries in progress, until now +
--     lease (the drainer's lease keeper pushes the deadline on), and members
--     past their deadline (a drainer that died) are dropped from the set;
--   - the job's cost is added to the tenant's outflow of this second (Redis
--     TIME), and fields older than ARGV[7] seconds are trimmed now and then.
-- A cancelled job is left as it is: the drainer drops it unsent.
--
-- KEYS[1]  the job's state hash (keys.JobState)
-- KEYS[2]  the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[3]  the tenant's deliveries in progress (keys.Delivering)
-- KEYS[4]  the tenant's outflow per second (keys.Outflow)
-- ARGV[1]  the attempt number (Sluice-Attempt: 1 on the first delivery)
-- ARGV[2]  the delivery's member in KEYS[3] (queue.Claimed.Token)
-- ARGV[3]  lease, ms
-- ARGV[4]  the job's cost, integer >= 1
-- ARGV[5]  PEXPIRE of the state and sequence, ms (keys.JobStateTTL)
-- ARGV[6]  PEXPIRE of the deliveries set, ms (keys.QueueTTL)
-- ARGV[7]  PEXPIRE of the outflow hash, ms (keys.OutflowTTL)
-- ARGV[8]  now, unix ms; "0" reads Redis TIME
--
-- Returns 1 when the delivery may start, 0 when the job was cancelled.

local now = js.now_ms(ARGV[8])
if js.state(KEYS[1]) == 'cancelled' then
  return 0
end
js.set(KEYS[1], {'state', 'in_flight', 'attempt', ARGV[1], 'updated_at', now}, ARGV[5])
js.advance(KEYS[1], KEYS[2], ARGV[5])

redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. now)
redis.call('PEXPIRE', KEYS[3], ARGV[6])

local sec = math.floor(now / 1000)
redis.call('HINCRBY', KEYS[4], sec, ARGV[4])
local keep = math.ceil(tonumber(ARGV[7]) / 1000)
if redis.call('HLEN', KEYS[4]) > 2 * keep then
  local old = {}
  for _, f in ipairs(redis.call('HKEYS', KEYS[4])) do
    if tonumber(f) == nil or tonumber(f) <= sec - keep then old[#old + 1] = f end
  end
  if #old > 0 then redis.call('HDEL', KEYS[4], unpack(old)) end
end
redis.call('PEXPIRE', KEYS[4], ARGV[7])
return 1
