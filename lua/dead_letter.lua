-- dead_letter.lua: the write of a dead letter, which ack.lua (Redis queue
-- backend) and job_state_settle.lua (Kafka) share. lua.Include puts this
-- file before each of them; run on its own it only defines a local function
-- and touches nothing.
--
-- dead_add(idx, recs, id, rec, died_ms, keep, ttl) adds job id to the
-- tenant's dead index idx (keys.JobIndex(t, "dead"), a sorted set scored by
-- the unix ms the job died, died_ms; 0 reads Redis TIME) and its dead letter
-- rec (JSON) to the records hash recs (keys.DeadRecords), then trims both:
-- the entries that died more than ttl ms before died_ms (at most 1000 per
-- call) and the oldest beyond keep entries, each with its record. Both keys'
-- TTL becomes ttl ms (keys.DeadTTL).
--
-- KEYS  none of its own: the including script passes two of its keys.
-- ARGV  none of its own.
-- Returns nothing.

local function dead_add(idx, recs, id, rec, died_ms, keep, ttl)
  local died = tonumber(died_ms) or 0
  if died <= 0 then
    local t = redis.call('TIME')
    died = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  keep, ttl = tonumber(keep), tonumber(ttl)
  redis.call('ZADD', idx, died, id)
  redis.call('HSET', recs, id, rec)
  local old = redis.call('ZRANGEBYSCORE', idx, '-inf', '(' .. (died - ttl), 'LIMIT', 0, 1000)
  if #old > 0 then
    redis.call('ZREM', idx, unpack(old))
    redis.call('HDEL', recs, unpack(old))
  end
  local over = redis.call('ZCARD', idx) - keep
  if over > 0 then
    local gone = redis.call('ZRANGE', idx, 0, math.min(over, 1000) - 1)
    redis.call('ZREM', idx, unpack(gone))
    redis.call('HDEL', recs, unpack(gone))
  end
  redis.call('PEXPIRE', idx, ttl)
  redis.call('PEXPIRE', recs, ttl)
end
