-- idem_mark.lua: record, for client ids whose enqueue outcome is unknown,
-- their unknown records (ingest/unknown.go), but only on the keys that
-- still hold what the request held there: its own pending marker, or the
-- unknown record it held for its retry. A record sent again after its
-- first send ran (no reply) never overwrites what a later request stored
-- meanwhile (its 202 answer, or its own hold on the record).
--
-- KEYS[i]          the idempotency key of id i (keys.Idempotency), all of
--                  one tenant
-- ARGV[1]          PX of the records, ms (keys.IdempotencyTTL)
-- ARGV[2i]         what key i must hold for the write: the request's
--                  marker ("pending:<token>") or its held record
-- ARGV[2i + 1]     the unknown record of id i
--
-- Returns the number of records written.

if #ARGV ~= 1 + 2 * #KEYS then
  return redis.error_reply('ERR idem_mark: want 1 + 2 arguments per key')
end
local n = 0
for i, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[2 * i] then
    redis.call('SET', k, ARGV[2 * i + 1], 'PX', ARGV[1])
    n = n + 1
  end
end
return n
