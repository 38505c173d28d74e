-- idem_write.lua: the conditional writes of client-id keys one ingest
-- request makes after its reservation (ingest/idempotency.go,
-- ingest/unknown.go): the release of its pending markers, and the unknown
-- records of ids whose enqueue outcome is unknown. Each key is written only
-- while it holds what the request left there (its own marker, or the
-- unknown record it held for its retry), so a write sent again after its
-- first send ran (no reply: Redis down or slow), or after the marker lapsed
-- and another request took the id, never touches another request's marker,
-- a stored answer or another hold. A record is also written on a key that
-- is gone (the marker lapsed and no one took the id).
--
-- KEYS[i]       the idempotency key of id i (keys.Idempotency), all of one
--               tenant
-- ARGV[1]       PX of the values written, ms (keys.IdempotencyTTL)
-- ARGV[2i]      what key i must hold for the write; "" for any value
-- ARGV[2i + 1]  the value to write; "" deletes the key
--
-- Returns the number of keys written or deleted.

if #ARGV ~= 1 + 2 * #KEYS then
  return redis.error_reply('ERR idem_write: want 1 + 2 arguments per key')
end
local n = 0
for i, k in ipairs(KEYS) do
  local want, val = ARGV[2 * i], ARGV[2 * i + 1]
  local cur = redis.call('GET', k)
  if want == '' or cur == want or (not cur and val ~= '') then
    if val == '' then
      n = n + redis.call('DEL', k)
    else
      redis.call('SET', k, val, 'PX', ARGV[1])
      n = n + 1
    end
  end
end
return n
