-- job_state_lib.lua: helpers for a job's state hash (keys.JobState),
-- prepended by jobstate.Script to every script that records job states
-- (enqueue.lua, ack.lua, lease_defer.lua, job_state_*.lua). It is a library:
-- it has no KEYS or ARGV of its own (each script's header lists its own) and
-- returns nothing; it defines the local table js.
--
-- The state hash of a job holds
--   state        queued | in_flight | retrying | done | dead | cancelled | expired
--   type         the job type
--   attempt      Sluice-Attempt of the last delivery started (0 while queued)
--   enqueued_at  unix ms
--   updated_at   unix ms of the last transition
--   seq          the job's place in its tenant's enqueue sequence (keys.JobSeq)
--   last_error   the last delivery error
--   reason       why a dead job is dead (rejected, attempts_exhausted, poison)
-- An older cancel marker, the string "cancelled" under the same key, is
-- still honoured; no helper writes fields over such a string.

local js = {}

-- js.now_ms returns v as an integer when it is a positive number, else Redis
-- TIME in unix ms.
function js.now_ms(v)
  local n = tonumber(v)
  if n ~= nil and n > 0 then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- js.state returns the state recorded under sk: the hash's state field,
-- "cancelled" for the string marker, or nil.
function js.state(sk)
  local kind = redis.call('TYPE', sk)['ok']
  if kind == 'hash' then
    local s = redis.call('HGET', sk, 'state')
    if s then return s end
    return nil
  elseif kind == 'string' then
    if redis.call('GET', sk) == 'cancelled' then return 'cancelled' end
  end
  return nil
end

-- js.writable reports whether fields may be written under sk: it is a hash
-- or absent (not a string marker).
function js.writable(sk)
  local kind = redis.call('TYPE', sk)['ok']
  return kind == 'hash' or kind == 'none'
end

-- js.set writes fields (a flat list: name, value, ...) to sk and sets its
-- TTL, skipping empty values; it does nothing when sk is a string marker.
function js.set(sk, fields, ttl)
  if not js.writable(sk) then return false end
  local f = {}
  for i = 1, #fields, 2 do
    local v = fields[i + 1]
    if v ~= nil and v ~= '' then
      f[#f + 1] = fields[i]
      f[#f + 1] = v
    end
  end
  if #f > 0 then
    redis.call('HSET', sk, unpack(f))
    redis.call('PEXPIRE', sk, ttl)
  end
  return true
end

-- js.advance raises the tenant's dispatched sequence dk (keys.JobsDispatched)
-- to the seq recorded under sk, when it is higher: the job has left the
-- head of the queue.
function js.advance(sk, dk, ttl)
  if redis.call('TYPE', sk)['ok'] ~= 'hash' then return end
  local seq = tonumber(redis.call('HGET', sk, 'seq'))
  if seq == nil then return end
  local cur = tonumber(redis.call('GET', dk)) or 0
  if seq > cur then
    redis.call('SET', dk, seq, 'PX', ttl)
  else
    redis.call('PEXPIRE', dk, ttl)
  end
end

-- js.settle records the end of a delivery or a drop: the delivery leaves
-- the tenant's in-flight set vk (keys.Delivering), the state becomes state
-- (with attempt, last error and reason when not empty), and the dispatched
-- sequence passes the job.
function js.settle(sk, dk, vk, member, state, attempt, err, reason, now, ttl)
  redis.call('ZREM', vk, member)
  js.set(sk, {'state', state, 'updated_at', now, 'attempt', attempt, 'last_error', err, 'reason', reason}, ttl)
  js.advance(sk, dk, ttl)
end
