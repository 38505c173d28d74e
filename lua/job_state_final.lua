-- job_state_final.lua: the write of a job's final state, which ack.lua
-- (Redis queue backend) and job_state_settle.lua (Kafka) share. lua.Include
-- puts this file before each of them; run on its own it only defines a local
-- function and touches nothing.
--
-- record_final(sk, seqk, state, last_error, reason, ttl) sets the job's
-- state hash sk (package jobstate): state, updated_at (Redis TIME, ms),
-- last_error and reason when not empty, its TTL refreshed to ttl ms. A job
-- dropped at the head of its queue (cancelled, expired, poison) also moves
-- the tenant's dispatched sequence seqk up to its seq; a delivered job did
-- that when its delivery started. An older cancel marker (a string under
-- sk) is left as it is.
--
-- KEYS  none of its own: the including script passes two of its keys.
-- ARGV  none of its own.
-- Returns nothing.

local function record_final(sk, seqk, state, last_error, reason, ttl)
  local t = redis.call('TIME')
  local f = {'state', state, 'updated_at', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
  if last_error ~= '' then f[#f + 1] = 'last_error'; f[#f + 1] = last_error end
  if reason ~= '' then f[#f + 1] = 'reason'; f[#f + 1] = reason end
  -- pcall: HSET fails (WRONGTYPE) only on the older string marker.
  if type(redis.pcall('HSET', sk, unpack(f))) == 'table' then
    return
  end
  redis.call('PEXPIRE', sk, ttl)
  if state == 'cancelled' or state == 'expired' or reason == 'poison' then
    local seq = tonumber(redis.call('HGET', sk, 'seq'))
    if seq and seq > (tonumber(redis.call('GET', seqk)) or 0) then
      redis.call('SET', seqk, seq, 'PX', ttl)
    end
  end
end
