-- idem_mark.lua: record, for client ids whose enqueue outcome is unknown,
-- their unknown records (ingest/unknown.go), but only on the keys that still
-- hold this request's own pending marker: a record sent again after its
-- first send ran (no reply) never overwrites what a later request stored
-- meanwhile (its 202 answer, or its hold on the record).
--
-- KEYS[i]    the idempotency key of id i (keys.Idempotency), all of one tenant
-- ARGV[1]    the request's pending marker ("pending:<token>")
-- ARGV[2]    PX of the records, ms (keys.IdempotencyTTL)
-- ARGV[2+i]  the unknown record of id i
--
-- Returns the number of records written.

if #ARGV ~= 2 + #KEYS then
  return redis.error_reply('ERR idem_mark: want 2 + one record per key')
end
local n = 0
for i, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then
    redis.call('SET', k, ARGV[2 + i], 'PX', ARGV[2])
    n = n + 1
  end
end
return n
