-- semaphore_release.lua: give back a tenant's in-flight slot.
--
-- KEYS[1]  inflight zset (keys.Inflight)
-- ARGV[1]  member
--
-- Returns 1 when the slot was held, 0 when it had already expired.

return redis.call('ZREM', KEYS[1], ARGV[1])
