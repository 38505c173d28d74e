-- schedule_due.lua: the tenants whose scheduled jobs may be due, from the
-- global hint (internal/scheduler). Not tenant-scoped: one key.
--
-- KEYS[1]  the hint (keys.ScheduledTenants), member tenant, score the
--          earliest due time or move lease deadline, unix ms
-- ARGV[1]  at most this many tenants are returned
-- ARGV[2]  how many due tenants to pass over first (a page's offset; absent:
--          0), so tenants not configured for the caller never hide the
--          later ones
--
-- Returns the tenants whose score is at or before Redis TIME, earliest
-- first.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', tonumber(ARGV[2]) or 0, tonumber(ARGV[1]))
