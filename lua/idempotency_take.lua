-- idempotency_take.lua: replace a client id's record only when it still
-- holds what the caller read (compare and set), so of two requests retrying
-- one id whose enqueue outcome was unknown, one takes it (ingest).
--
-- KEYS[1]  the id's record (keys.Idempotency)
-- ARGV[1]  the value the caller read
-- ARGV[2]  the new value
-- ARGV[3]  its PEXPIRE, ms (keys.IdempotencyTTL), integer >= 1
--
-- Returns 1 when the record was replaced, 0 when it held something else (or
-- nothing).

local ttl = tonumber(ARGV[3])
if ttl == nil or ttl < 1 then
  return redis.error_reply('ERR idempotency_take: the ttl must be an integer >= 1')
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
