-- admission_rate_read.lua: a tenant's admission decisions in the last
-- complete seconds, across all ingest instances (GET /v1/tenants/{id}/stats).
-- Read-only.
--
-- KEYS[1]  the tenant's admission counters (keys.AdmissionRate)
-- ARGV[1]  the window, whole seconds >= 1: the seconds now-window .. now-1
--          (Redis TIME) are summed; the current, incomplete one is not
--
-- Returns {admitted, refused}: two integers, the jobs of the window.

local window = tonumber(ARGV[1])
if window == nil or window < 1 or window ~= math.floor(window) then
  return redis.error_reply('ERR admission_rate_read: window must be an integer >= 1')
end
local sec = tonumber(redis.call('TIME')[1])
local fields = {}
for i = window, 1, -1 do
  fields[#fields + 1] = (sec - i) .. ':admitted'
  fields[#fields + 1] = (sec - i) .. ':refused'
end
local adm, ref = 0, 0
for i, v in ipairs(redis.call('HMGET', KEYS[1], unpack(fields))) do
  local n = tonumber(v) or 0
  if i % 2 == 1 then adm = adm + n else ref = ref + n end
end
return {adm, ref}
