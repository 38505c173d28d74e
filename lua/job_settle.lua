-- job_settle.lua: the Kafka backend's record of how a delivery or a drop
-- ended, for job_state_settle.lua (kafka_finish.lua, which finishes a
-- tenant's jobs together, makes the same writes with record_final's batch;
-- the Redis backend does this inside ack.lua and lease_defer.lua). lua.Include puts
-- job_state_final.lua and dead_letter.lua, then this file, before each of
-- them; run on its own it only defines a local function and touches
-- nothing.
--
-- settle_delivery(k, a) takes the including script's KEYS (k) and ARGV (a),
-- whose first 5 keys and 12 arguments are job_state_settle.lua's (see its
-- header). The delivery leaves the tenant's deliveries in progress; a dead
-- job's dead letter is written to the tenant's dead index and letters
-- (dead_add of dead_letter.lua; the consumer wrote it to the DLQ topic
-- before); the job's state becomes a[2] through record_final of
-- job_state_final.lua, the write ack.lua makes on the Redis backend. The
-- hash is created when missing: on Kafka a job may finish before the
-- producer's post-ack write records it, which then keeps this state
-- (job_state_enqueue.lua).
--
-- KEYS  none of its own: the including script passes its keys.
-- ARGV  none of its own.
-- Returns nothing.

local function settle_delivery(k, a)
  redis.call('ZREM', k[3], a[1])
  if a[6] ~= '' then
    dead_add(k[4], k[5], a[10], a[6], a[8], a[9], a[7])
  end
  local due = tonumber(a[11])
  if due ~= nil and due <= 0 then due = nil end
  record_final(k[1], k[2], a[2], a[3], a[4], a[5], due, a[12])
end
