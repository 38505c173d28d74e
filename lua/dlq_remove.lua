-- dlq_remove.lua: remove dead letters of a tenant (package dlq: after a
-- redrive, and DELETE /admin/v1/tenants/{id}/dlq[/{job_id}]).
--
-- Mode "ids" removes each given job's record and index entry when its
-- record is still the one the caller read (the SHA-1 of the stored JSON;
-- "" removes whatever is there): a job that died again since then keeps
-- its new dead letter. An index entry without a record is removed with an
-- empty SHA-1 only. Mode "all" removes both keys.
--
-- KEYS[1]  the tenant's dead index (keys.JobIndex(t, "dead"))
-- KEYS[2]  the tenant's dead letters (keys.DeadRecords)
-- ARGV[1]  mode: "ids" or "all"
-- ARGV[2..] mode ids: pairs of job id, SHA-1 of its record as read (or "")
--
-- Returns how many dead letters were removed (for "all": the index's size
-- before).

local mode = ARGV[1]
if mode == 'all' then
  local n = redis.call('ZCARD', KEYS[1])
  redis.call('DEL', KEYS[1], KEYS[2])
  return n
end
if mode ~= 'ids' or #ARGV % 2 ~= 1 then
  return redis.error_reply('ERR dlq_remove: mode must be all, or ids with pairs of job id and sha1')
end
local n = 0
for i = 2, #ARGV, 2 do
  local id, want = ARGV[i], ARGV[i + 1]
  local rec = redis.call('HGET', KEYS[2], id)
  if rec then
    if want == '' or redis.sha1hex(rec) == want then
      redis.call('HDEL', KEYS[2], id)
      redis.call('ZREM', KEYS[1], id)
      n = n + 1
    end
  elseif want == '' then
    n = n + redis.call('ZREM', KEYS[1], id)
  end
end
return n
