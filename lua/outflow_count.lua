-- outflow_count.lua: the write of a tenant's outflow per second
-- (keys.Outflow), which outflow_add.lua (the drainer's flush of the starts
-- it counted) and take.lua (the starts it records itself) share. lua.Include
-- puts this file before each of them; run on its own it only defines a
-- local function and touches nothing.
--
-- outflow_count(key, counts, ttl, now) adds counts, a flat array of (unix
-- second, units) pairs, to the hash key (HINCRBY per pair), refreshes its
-- TTL to ttl ms, and deletes the fields of seconds older than ttl before
-- now (unix ms), once the hash holds more than ttl's seconds of them. An
-- empty counts writes nothing. Returns the number of pairs added.
--
-- KEYS  none of its own: the including script passes its key.
-- ARGV  none of its own.

local function outflow_count(key, counts, ttl, now)
  local n = 0
  for i = 1, #counts - 1, 2 do
    redis.call('HINCRBY', key, counts[i], counts[i + 1])
    n = n + 1
  end
  if n == 0 then return 0 end
  redis.call('PEXPIRE', key, ttl)
  local keep = math.ceil(tonumber(ttl) / 1000)
  local sec = math.floor(now / 1000)
  if redis.call('HLEN', key) > keep then
    local old = {}
    for _, f in ipairs(redis.call('HKEYS', key)) do
      local s = tonumber(f)
      if s == nil or s <= sec - keep then old[#old + 1] = f end
    end
    if #old > 0 then redis.call('HDEL', key, unpack(old)) end
  end
  return n
end
