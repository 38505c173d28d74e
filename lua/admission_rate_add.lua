-- admission_rate_add.lua: add one ingest instance's admission decisions of
-- the last second (or so) to a tenant's per-second counters, the rate
-- behind "admission" in GET /v1/tenants/{id}/stats. Each ingest sends one
-- call per tenant with decisions, all in one pipeline, once a second.
--
-- KEYS[1]  the tenant's admission counters (keys.AdmissionRate): fields
--          "<sec>:admitted" and "<sec>:refused", sec = Redis TIME's second
-- ARGV[1]  jobs admitted, an integer >= 0
-- ARGV[2]  jobs refused (429), an integer >= 0
-- ARGV[3]  seconds kept, an integer >= 1: when the hash holds more than
--          4 × this many fields, those of seconds older than now - kept
--          are deleted
-- ARGV[4]  PEXPIRE of the hash, ms (keys.AdmissionRateTTL)
--
-- Returns the second the counts were added to (Redis TIME).

local adm, ref = tonumber(ARGV[1]), tonumber(ARGV[2])
local keep, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
if adm == nil or ref == nil or adm < 0 or ref < 0 or adm ~= math.floor(adm) or ref ~= math.floor(ref) then
  return redis.error_reply('ERR admission_rate_add: counts must be integers >= 0')
end
if keep == nil or keep < 1 or ttl == nil or ttl < 1 then
  return redis.error_reply('ERR admission_rate_add: kept seconds and ttl must be >= 1')
end
local sec = tonumber(redis.call('TIME')[1])
if adm > 0 then redis.call('HINCRBY', KEYS[1], sec .. ':admitted', adm) end
if ref > 0 then redis.call('HINCRBY', KEYS[1], sec .. ':refused', ref) end
redis.call('PEXPIRE', KEYS[1], ttl)
if redis.call('HLEN', KEYS[1]) > 4 * keep then
  local old = {}
  for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
    local s = tonumber(string.match(f, '^(%d+):'))
    if s == nil or s < sec - keep then old[#old + 1] = f end
  end
  if #old > 0 then redis.call('HDEL', KEYS[1], unpack(old)) end
end
return sec
