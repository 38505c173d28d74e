-- idem_release.lua: release the client-id reservations one ingest request
-- made (ingest/idempotency.go): each key is deleted only while it still
-- holds this request's own pending marker, so a release sent again after
-- its first send ran (no reply: Redis down or slow), or after the marker
-- lapsed and another request reserved the id, never deletes another
-- request's marker, a stored answer or an unknown record.
--
-- KEYS[i]  the idempotency key of id i (keys.Idempotency), all of one tenant
-- ARGV[1]  the request's pending marker ("pending:<token>")
--
-- Returns the number of keys deleted.

local n = 0
for _, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then
    redis.call('DEL', k)
    n = n + 1
  end
end
return n
