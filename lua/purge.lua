-- purge.lua: purge one chunk of a tenant's waiting jobs (POST
-- /admin/v1/tenants/{id}/queue:purge; package jobstate runs it chunk by chunk,
-- never in one long script).
--
-- Each waiting job read from the source becomes state cancelled with reason
-- purged (updated_at Redis TIME, its TTL refreshed), its cost (the state's
-- cost field, else the envelope's, else 1) leaves the tenant's backlog
-- counter (never below 0; the finish of a purged job lowers it no more:
-- ack.lua and backlog_decr.lua skip reason purged), and it leaves the index of
-- the state it had (index_leave of job_state_final.lua, which lua.Include
-- puts first); the tenant's dispatched sequence rises to its seq, so the
-- jobs queued after the purge have the right position. A job already
-- cancelled, or in a final state (done, dead, expired), or under the older
-- string marker, leaves the source but is not counted.
--
-- Sources (ARGV[1]):
--   queue    the queue list (keys.Queue, Redis backend): the jobs at its head
--            up to the first one with a seq above ARGV[2] (queued after the
--            purge began), LTRIMmed off, so no drainer gets them. The id is
--            read from the envelope's head as claim.lua reads it.
--   delayed  the delayed set (keys.Delayed, Redis backend): retries waiting
--            for their time, ZREMed.
--   index    an index (keys.JobIndex queued or retrying; both backends): the
--            ids scored up to ARGV[2] whose state is still the index's, so a
--            job the Kafka backend holds in memory, or a drainer has claimed
--            already, is dropped unsent when it comes up (the cancel check).
--
-- KEYS[1]  the source (keys.Queue, keys.Delayed or keys.JobIndex)
-- KEYS[2]  the tenant's dispatched sequence (keys.JobsDispatched)
-- KEYS[3]  the tenant's backlog counter (keys.Backlog)
-- ARGV[1]  the source kind: "queue", "delayed" or "index"
-- ARGV[2]  the highest seq (queue) or score (index) purged; "+inf" for all
-- ARGV[3]  chunk: most entries read, integer 1 to 1000
-- ARGV[4]  job-state key prefix (keys.JobState(tenant, ""))
-- ARGV[5]  PEXPIRE of the job states and the sequence, ms (keys.JobStateTTL)
-- ARGV[6]  PEXPIRE of the backlog counter, ms (keys.BacklogTTL)
--
-- Returns {purged, read}: how many jobs became cancelled (purged), and how
-- many entries left the source; read < ARGV[3] means the source holds no
-- more jobs to purge.

local kind, chunk, prefix, ttl = ARGV[1], tonumber(ARGV[3]), ARGV[4], ARGV[5]
if chunk == nil or chunk < 1 or chunk > 1000 or (kind ~= 'queue' and kind ~= 'delayed' and kind ~= 'index') then
  return redis.error_reply('ERR purge: kind must be queue, delayed or index, and chunk 1 to 1000')
end
if (tonumber(ARGV[6]) or 0) < 1 then
  return redis.error_reply('ERR purge: the backlog ttl must be an integer >= 1')
end
local units = 0
local top = tonumber(ARGV[2]) or math.huge
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local purged, gone = 0, tonumber(redis.call('GET', KEYS[2])) or 0
local waiting = {queued = true, retrying = true, in_flight = true}

-- cost_of is the cost a purged job leaves the backlog with: its state's
-- cost field, else env's "cost", else 1.
local function cost_of(sk, env)
  local c = tonumber(redis.pcall('HGET', sk, 'cost'))
  if c == nil and env then c = tonumber(string.match(env, '"cost":(%d+)')) end
  if c == nil or c < 1 then c = 1 end
  return c
end

-- mark cancels job id (state hash sk; env its envelope when read) as purged
-- when it is waiting.
local function mark(sk, id, seq, env)
  if seq and seq > gone then gone = seq end
  local old = index_leave(sk, id, 'cancelled')
  if old and not waiting[old] then return end
  if redis.pcall('HGET', sk, 'reason') == 'purged' then return end
  local c = cost_of(sk, env)
  if type(redis.pcall('HSET', sk, 'state', 'cancelled', 'reason', 'purged', 'updated_at', now)) == 'table' then
    return
  end
  redis.call('PEXPIRE', sk, ttl)
  purged = purged + 1
  units = units + c
end

local function id_of(env)
  local id = string.match(env, '^{"v":%d+,"id":"([^"\\]*)"')
  if id == nil then
    local ok, dec = pcall(cjson.decode, env)
    if ok and type(dec) == 'table' and type(dec.id) == 'string' then id = dec.id end
  end
  return id
end

local function seq_of(sk)
  local s = redis.pcall('HGET', sk, 'seq')
  if type(s) == 'string' then return tonumber(s) end
  return nil
end

local read = 0
if kind == 'queue' then
  for _, env in ipairs(redis.call('LRANGE', KEYS[1], 0, chunk - 1)) do
    local id = id_of(env)
    local sk = id and prefix .. id
    local seq = sk and seq_of(sk)
    if seq and seq > top then break end
    if id then mark(sk, id, seq, env) end
    read = read + 1
  end
  if read > 0 then redis.call('LTRIM', KEYS[1], read, -1) end
elseif kind == 'delayed' then
  local envs = redis.call('ZRANGE', KEYS[1], 0, chunk - 1)
  for _, env in ipairs(envs) do
    local id = id_of(env)
    if id then mark(prefix .. id, id, seq_of(prefix .. id), env) end
  end
  read = #envs
  if read > 0 then redis.call('ZREM', KEYS[1], unpack(envs)) end
else
  local state = string.match(KEYS[1], ':jobs:([^:]*)$')
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, chunk)
  for _, id in ipairs(ids) do
    local sk = prefix .. id
    local st = redis.pcall('HGET', sk, 'state')
    if st == state then mark(sk, id, seq_of(sk)) end
  end
  read = #ids
  if read > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end
end
if gone > (tonumber(redis.call('GET', KEYS[2])) or 0) then
  redis.call('SET', KEYS[2], gone, 'PX', ttl)
end
if units > 0 then
  if redis.call('DECRBY', KEYS[3], units) < 0 then redis.call('SET', KEYS[3], 0) end
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
end
return {purged, read}
