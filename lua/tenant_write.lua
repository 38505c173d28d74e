-- tenant_write.lua: store one admin change of a tenant's runtime spec and its
-- audit entry, atomically, if the tenant's version is still the one the
-- change was computed from (compare-and-set).
--
-- The override hash holds: spec (the tenant's spec as JSON, defaults
-- applied), version (raised by 1 on every write, never reset), deleted ("1":
-- a tombstone hiding the tenant of the config file), and the flattened
-- outflow fields outflow_rate and outflow_capacity that leaky_bucket.lua
-- reads on every take, written here together with spec so the two never
-- disagree (absent when the spec's value is 0 or there is no spec).
--
-- KEYS[1]  the tenant's override hash (keys.Override)
-- KEYS[2]  the tenant's audit list (keys.Audit), newest entry first
-- ARGV[1]  expected version: the hash's version the change was computed
--          from (0 when the hash has none)
-- ARGV[2]  mode: "put" (store spec, clear a tombstone), "tombstone" (delete
--          spec, set deleted), "clear" (delete spec and tombstone) or
--          "note" (change nothing but the version: an audited operation
--          that is not a spec change, such as a purge or a dead-letter redrive)
-- ARGV[3]  spec JSON (mode put; otherwise ignored)
-- ARGV[4]  outflow_rate, units/s, > 0 or "" for none (mode put)
-- ARGV[5]  outflow_capacity, units, > 0 or "" for none (mode put)
-- ARGV[6]  the audit entry JSON, pushed as it is (at most ARGV[9] bytes;
--          tenants.AuditEntryMaxBytes by construction)
-- ARGV[7]  PEXPIRE of both keys in ms (keys.OverrideTTL), integer >= 1
-- ARGV[8]  most audit entries kept (keys.AuditMaxEntries), integer >= 1
-- ARGV[9]  most audit bytes kept (keys.AuditMaxBytes), integer >= 1
--
-- The audit keeps the newest entries whose lengths add up to at most
-- ARGV[9] bytes, at most ARGV[8] of them: after the push the list is read
-- from its head in chunks, summing lengths, and cut before the first entry
-- that would pass either cap. The walk reads at most ARGV[9] bytes plus one
-- chunk, and also trims entries of an older, unbounded format on the first
-- write after an upgrade. One entry per version, pushed at the head and
-- trimmed only at the tail: audit_page.lua relies on it.
--
-- Returns {1, new_version} when written, or {0, current_version} when the
-- version was not the expected one (nothing is written). Arguments are
-- checked before the first write.

local expect = tonumber(ARGV[1])
local mode = ARGV[2]
local ttl = tonumber(ARGV[7])
local keep = tonumber(ARGV[8])
local keepBytes = tonumber(ARGV[9])
if expect == nil or ttl == nil or ttl < 1 or keep == nil or keep < 1 or keepBytes == nil or keepBytes < 1 then
  return redis.error_reply('ERR tenant_write: expected version, ttl and audit caps must be numbers (ttl, caps >= 1)')
end
if #ARGV[6] > keepBytes then
  return redis.error_reply('ERR tenant_write: the audit entry is larger than the audit byte cap')
end
if mode ~= 'put' and mode ~= 'tombstone' and mode ~= 'clear' and mode ~= 'note' then
  return redis.error_reply('ERR tenant_write: mode must be put, tombstone, clear or note')
end
if mode == 'put' and ARGV[3] == '' then
  return redis.error_reply('ERR tenant_write: put needs a spec')
end
for i = 4, 5 do
  if ARGV[i] ~= '' and not ((tonumber(ARGV[i]) or 0) > 0) then
    return redis.error_reply('ERR tenant_write: outflow rate and capacity must be > 0 or empty')
  end
end

local cur = tonumber(redis.call('HGET', KEYS[1], 'version')) or 0
if cur ~= expect then
  return { 0, cur }
end
local ver = cur + 1

if mode == 'note' then
  redis.call('HSET', KEYS[1], 'version', ver)
elseif mode == 'put' then
  redis.call('HSET', KEYS[1], 'spec', ARGV[3], 'version', ver)
  redis.call('HDEL', KEYS[1], 'deleted')
  if ARGV[4] ~= '' then
    redis.call('HSET', KEYS[1], 'outflow_rate', ARGV[4])
  else
    redis.call('HDEL', KEYS[1], 'outflow_rate')
  end
  if ARGV[5] ~= '' then
    redis.call('HSET', KEYS[1], 'outflow_capacity', ARGV[5])
  else
    redis.call('HDEL', KEYS[1], 'outflow_capacity')
  end
else
  redis.call('HDEL', KEYS[1], 'spec', 'outflow_rate', 'outflow_capacity')
  redis.call('HSET', KEYS[1], 'version', ver)
  if mode == 'tombstone' then
    redis.call('HSET', KEYS[1], 'deleted', '1')
  else
    redis.call('HDEL', KEYS[1], 'deleted')
  end
end
redis.call('PEXPIRE', KEYS[1], ttl)

redis.call('LPUSH', KEYS[2], ARGV[6])
local kept, bytes, full = 0, 0, false
while not full do
  local chunk = redis.call('LRANGE', KEYS[2], kept, kept + 15)
  for _, e in ipairs(chunk) do
    if kept >= keep or bytes + #e > keepBytes then
      full = true
      break
    end
    kept, bytes = kept + 1, bytes + #e
  end
  if #chunk < 16 then
    break
  end
end
redis.call('LTRIM', KEYS[2], 0, kept - 1)
redis.call('PEXPIRE', KEYS[2], ttl)
return { 1, ver }
