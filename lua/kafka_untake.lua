-- kafka_untake.lua: a job a Kafka take started (kafka_take.lua) goes back
-- to its FIFO unsent: its delivery leaves the deliveries in progress and
-- its recorded start is undone (undo_start of job_state_final.lua, which
-- lua.Include puts first: state queued, attempt back, the id back in the
-- queued index), so Sluice-Attempt skips no number and the job can be
-- cancelled while it waits.
--
-- KEYS[1]  the job's state hash (keys.JobState)
-- KEYS[2]  the tenant's deliveries in progress (keys.Delivering)
-- ARGV[1]  the attempt number the take recorded (queue.Claimed.Started)
-- ARGV[2]  the delivery's member in KEYS[2] (queue.Claimed.Token)
--
-- Returns 1 when the start was undone, 0 when the state had moved on (the
-- delivery left KEYS[2] either way).

redis.call('ZREM', KEYS[2], ARGV[2])
if undo_start(KEYS[1], ARGV[1]) then return 1 end
return 0
