-- outflow_add.lua: add one drainer's dispatched units per second to a
-- tenant's outflow (both queue backends). The drainer counts the units of
-- the deliveries it starts per tenant and wall second in memory and flushes
-- them with this script once a second (and at shutdown), instead of one
-- HINCRBY per start; stats' measured outflow and the console history, which
-- read whole past seconds, see a second's units at most a second late.
--
-- In one step: each (second, units) pair is added to KEYS[1]; fields older
-- than ARGV[1] ms before now are trimmed and the hash's TTL refreshed to
-- ARGV[1]; deliveries of KEYS[2] whose deadline passed before now (a
-- drainer that died) leave the set. The housekeeping the first start of a
-- second did in job_state_dispatch.lua before. lua.Include puts
-- outflow_count.lua first (the write take.lua shares for the starts it
-- records and counts itself).
--
-- KEYS[1]  the tenant's outflow per second (keys.Outflow), field = unix second
-- KEYS[2]  the tenant's deliveries in progress (keys.Delivering)
-- ARGV[1]  PEXPIRE of KEYS[1], ms (keys.OutflowTTL); also the age bound
-- ARGV[2]  now, unix ms; "0" reads Redis TIME
-- ARGV[3..] pairs: unix second, units (integers; a negative one takes back
--           the units take.lua counted for a job the drainer gave back unsent)
--
-- Returns the number of pairs added.

local now = tonumber(ARGV[2])
if now == nil or now <= 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local counts = {}
for i = 3, #ARGV - 1, 2 do
  counts[#counts + 1] = ARGV[i]
  counts[#counts + 1] = ARGV[i + 1]
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)
return outflow_count(KEYS[1], counts, ARGV[1], now)
