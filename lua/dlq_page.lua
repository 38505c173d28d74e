-- dlq_page.lua: read one page of a tenant's dead letters, newest first
-- (package dlq, GET /admin/v1/tenants/{id}/dlq). Read-only.
--
-- The dead index orders jobs by (score, member) descending, as ZREVRANGE
-- does. A page after the cursor (score, member) starts right after the
-- cursor's member when it is still in the index with that score, else at
-- the first entry below it in that order (members of an equal score are
-- compared byte by byte, as Redis orders them), so dead jobs that arrive
-- or leave meanwhile neither shift nor repeat entries.
--
-- KEYS[1]  the tenant's dead index (keys.JobIndex(t, "dead"))
-- KEYS[2]  the tenant's dead letters (keys.DeadRecords)
-- ARGV[1]  most entries, integer >= 1
-- ARGV[2]  the cursor's score (unix ms), "" for the newest entries
-- ARGV[3]  the cursor's member (a job id); with ARGV[2] only
--
-- Returns {id, score, record, ...}: per entry its job id, its score (unix
-- ms the job died) and its dead letter JSON ("" when the record is gone).

local limit = tonumber(ARGV[1])
if limit == nil or limit < 1 or limit ~= math.floor(limit) then
  return redis.error_reply('ERR dlq_page: limit must be an integer >= 1')
end
local cs, cm = ARGV[2], ARGV[3]
if cs ~= '' and tonumber(cs) == nil then
  return redis.error_reply('ERR dlq_page: the cursor score must be a number')
end

local function below(a, b) -- a sorts before b, byte by byte
  for i = 1, math.min(#a, #b) do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local flat
if cs == '' then
  flat = redis.call('ZREVRANGE', KEYS[1], 0, limit - 1, 'WITHSCORES')
else
  local at = redis.call('ZSCORE', KEYS[1], cm)
  if at and tonumber(at) == tonumber(cs) then
    local r = redis.call('ZREVRANK', KEYS[1], cm)
    flat = redis.call('ZREVRANGE', KEYS[1], r + 1, r + limit, 'WITHSCORES')
  else
    flat = {}
    local same = redis.call('ZREVRANGEBYSCORE', KEYS[1], cs, cs, 'WITHSCORES')
    for i = 1, #same, 2 do
      if #flat >= 2 * limit then break end
      if below(same[i], cm) then
        flat[#flat + 1] = same[i]
        flat[#flat + 1] = same[i + 1]
      end
    end
    local need = limit - #flat / 2
    if need > 0 then
      local rest = redis.call('ZREVRANGEBYSCORE', KEYS[1], '(' .. cs, '-inf', 'WITHSCORES', 'LIMIT', 0, need)
      for _, v in ipairs(rest) do flat[#flat + 1] = v end
    end
  end
end

local out = {}
if #flat == 0 then
  return out
end
local ids = {}
for i = 1, #flat, 2 do ids[#ids + 1] = flat[i] end
local recs = redis.call('HMGET', KEYS[2], unpack(ids))
for i, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = flat[2 * i]
  out[#out + 1] = recs[i] or ''
end
return out
