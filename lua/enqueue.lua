-- enqueue.lua: append one tenant's jobs to its queue and add their cost to its
-- backlog counter, atomically (Redis queue backend).
--
-- KEYS[1]   the tenant's queue list (keys.Queue); jobs are RPUSHed to its tail,
--           so consumers take the oldest job from its head
-- KEYS[2]   the tenant's backlog counter (keys.Backlog), in cost units
-- ARGV[1]   PEXPIRE of the queue in milliseconds (keys.QueueTTL), integer >= 1
-- ARGV[2]   PEXPIRE of the backlog counter in milliseconds (keys.BacklogTTL),
--           integer >= 1
-- ARGV[3]   total cost of the jobs, integer >= 1
-- ARGV[4..] the job envelopes (JSON), pushed in this order
--
-- Returns {queue_length, backlog}: the list's length and the counter's value
-- after the write. Every argument is checked before the first write, so a bad
-- call writes nothing (Redis does not roll back a script that fails halfway).

local function posint(v)
  local n = tonumber(v)
  if n == nil or n < 1 or n ~= math.floor(n) then
    return nil
  end
  return n
end

local queue_ttl = posint(ARGV[1])
local backlog_ttl = posint(ARGV[2])
local cost = posint(ARGV[3])
if queue_ttl == nil or backlog_ttl == nil or cost == nil then
  return redis.error_reply('ERR enqueue: ttls and cost must be integers >= 1')
end
local last = #ARGV
if last < 4 then
  return redis.error_reply('ERR enqueue: no jobs')
end

-- unpack() is bounded by the Lua C stack (LUAI_MAXCSTACK = 8000), so push in
-- chunks.
local chunk = 1000
local len = 0
for first = 4, last, chunk do
  len = redis.call('RPUSH', KEYS[1], unpack(ARGV, first, math.min(first + chunk - 1, last)))
end
local backlog = redis.call('INCRBY', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {len, backlog}
