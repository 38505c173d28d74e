-- history_sample.lua: read a tenant's backlog counter and record it, with
-- the outflow of the last complete seconds, in the tenant's history
-- (internal/depth's sampler, every depth.Every, in ingest and every drainer).
--
-- KEYS[1]  backlog counter (keys.Backlog)
-- KEYS[2]  outflow per second (keys.Outflow), field = unix second
-- KEYS[3]  history hash (keys.History), field = slot start (unix second)
-- ARGV[1]  step: the slot length in whole seconds >= 1 (keys.HistoryStep)
-- ARGV[2]  span: seconds of history kept (keys.HistorySpan)
-- ARGV[3]  ttl of the history hash, in seconds (keys.HistoryTTL)
--
-- At Redis TIME second `sec`, the slot is sec - sec % step; its value is
-- "<backlog> <outflow>", where outflow is the units of the `step` complete
-- seconds before sec (sec-step .. sec-1) divided by step, in units/s. A
-- later sample of the same slot (from any instance) overwrites it. When
-- the slot is new, fields older than span are deleted. A tenant with no
-- state at all (no backlog counter, no outflow in the window, no history)
-- gets no history key: sampling an idle tenant creates nothing.
--
-- Returns the backlog counter's value as stored ("" when absent), so the
-- caller's gauge needs no second read.

local step = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
if step == nil or step < 1 or step ~= math.floor(step) or span == nil or span < step
    or ttl == nil or ttl < 1 then
  return redis.error_reply('ERR history_sample: step, span and ttl must be whole seconds, span >= step >= 1')
end
local sec = tonumber(redis.call('TIME')[1])

local backlog = redis.call('GET', KEYS[1])
local fields = {}
for i = step, 1, -1 do
  fields[#fields + 1] = tostring(sec - i)
end
local units = 0
for _, v in ipairs(redis.call('HMGET', KEYS[2], unpack(fields))) do
  units = units + (tonumber(v) or 0)
end

if backlog == false and units == 0 and redis.call('EXISTS', KEYS[3]) == 0 then
  return ''
end

local slot = sec - sec % step
local value = (backlog or '0') .. ' ' .. string.format('%.6g', units / step)
if redis.call('HSET', KEYS[3], tostring(slot), value) == 1 then
  local old = {}
  for _, f in ipairs(redis.call('HKEYS', KEYS[3])) do
    local t = tonumber(f)
    if t == nil or t < slot - span then
      old[#old + 1] = f
    end
  end
  if #old > 0 then
    redis.call('HDEL', KEYS[3], unpack(old))
  end
end
redis.call('EXPIRE', KEYS[3], ttl)
if backlog == false then return '' end
return backlog
