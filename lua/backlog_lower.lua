-- backlog_lower.lua: the Kafka backend's lowering of a tenant's backlog
-- counter when a job is finished, which backlog_decr.lua and
-- kafka_finish.lua share (the Redis backend does this inside ack.lua).
-- lua.Include puts this file before each of them; run on its own it only
-- defines a local function and touches nothing.
--
-- backlog_lower(bk, sk, cost, ttl, refresh, ok, okttl) DECRBYs the counter
-- bk by cost, never below 0 (a missing or expired counter, or one that was
-- lowered already for a job delivered twice, stays at 0). What the counter
-- could not give, when ok (the tenant's keys.BacklogOwed) is given, is owed:
-- INCRBY ok by it, its TTL okttl ms (keys.BacklogOwedTTL). A finish can come
-- before the producer's post-ack write has raised the counter for that job
-- (Kafka hands the record out at the ack), and backlog_raise.lua pays what
-- is owed out of the raise, so the counter ends right in either order. The
-- TTL (ttl ms,
-- keys.BacklogTTL) is refreshed when refresh is "1" (the caller's first
-- finish of the tenant in a wall second, keys.Refresh) and whenever this
-- call created the counter or set it to 0 (SET clears a TTL), so the
-- counter never lives without one and an existing one's TTL stays within a
-- second of BacklogTTL while jobs finish. A job that was purged
-- (POST /admin/v1/tenants/{id}/queue:purge: its state hash sk, when given,
-- has reason "purged") is not counted again: the purge set the counter to
-- 0 without it, so lowering it now would undercount the jobs queued since.
-- Call it before the job's state is written.
--
-- KEYS  none of its own: the including script passes its keys.
-- ARGV  none of its own.
-- sk and ok may be nil or "" (none).
-- Returns (from the function) the counter after the decrement (>= 0), or
-- as it is for a purged job.

local function backlog_lower(bk, sk, cost, ttl, refresh, ok, okttl)
  if sk and sk ~= '' then
    -- pcall: HGET fails (WRONGTYPE) only on the older string marker.
    if redis.pcall('HGET', sk, 'reason') == 'purged' then
      return tonumber(redis.call('GET', bk)) or 0
    end
  end
  -- A counter DECRBY creates is below 0, and the SET clears a TTL: both
  -- refresh it; an existing counter keeps its TTL but once a second.
  local left = redis.call('DECRBY', bk, cost)
  if left < 0 or refresh == '1' then
    if left < 0 then
      if ok and ok ~= '' then
        redis.call('INCRBY', ok, -left)
        redis.call('PEXPIRE', ok, okttl)
      end
      redis.call('SET', bk, 0)
      left = 0
    end
    redis.call('PEXPIRE', bk, ttl)
  end
  return left
end
