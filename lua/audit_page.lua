-- audit_page.lua: read one page of a tenant's audit list, newest first,
-- from a version down.
--
-- tenant_write.lua pushes exactly one entry per version of the tenant, the
-- version it writes to the override hash, and trims only the oldest
-- entries, so the entry of version v sits at index head - v, head being the
-- hash's version. A page below version `before` therefore starts at index
-- head - before + 1 whatever was appended since the cursor was handed out.
-- The caller checks the versions it gets and falls back to reading the list
-- from its head when they are not the expected ones.
--
-- KEYS[1]  the tenant's override hash (keys.Override)
-- KEYS[2]  the tenant's audit list (keys.Audit), newest entry first
-- ARGV[1]  before: 0 for the newest entries, else the page holds the
--          entries of the versions below it, integer >= 0
-- ARGV[2]  limit: most entries, integer >= 1
-- ARGV[3]  byte budget: no entry is read once the entries read reach this
--          many bytes (at least one entry is read), integer >= 1
--
-- Returns {head, start, length, entry...}: the hash's version (0 when it
-- has none), the index the page starts at, the list's length, then the
-- page's entries as stored. Read-only.

local before = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local budget = tonumber(ARGV[3])
if before == nil or before < 0 or limit == nil or limit < 1 or budget == nil or budget < 1 then
  return redis.error_reply('ERR audit_page: before must be >= 0, limit and byte budget >= 1')
end

local head = tonumber(redis.call('HGET', KEYS[1], 'version')) or 0
local start = 0
if before > 0 then
  start = head - before + 1
  if start < 0 then
    start = 0
  end
end
local length = redis.call('LLEN', KEYS[2])
local out = { head, start, length }
local bytes = 0
local i = start
while i < length and i < start + limit and bytes < budget do
  local e = redis.call('LINDEX', KEYS[2], i)
  if not e then
    break
  end
  out[#out + 1] = e
  bytes = bytes + #e
  i = i + 1
end
return out
