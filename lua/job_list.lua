-- job_list.lua: one page of a tenant's job index (GET /v1/jobs?state=, package
-- jobstate), each listed job with its state hash, in one step.
--
-- The page starts after the cursor (score, member): at the member's rank when
-- it is still in the index with that score, else after every entry that
-- sorts before (score, member) in the page's order (a job that moved on
-- meanwhile shifts nothing). Entries whose state hash is gone, or holds
-- another state (an index write that lagged), are skipped; when ARGV[8] is
-- "1" they are also ZREMed (lazily, after the page is read). At most ARGV[7]
-- entries are read per call, so a run of stale entries ends a page early
-- with more = 1.
--
-- KEYS[1]  the tenant's index of the state (keys.JobIndex)
-- KEYS[2]  the tenant's dispatched sequence (keys.JobsDispatched)
-- ARGV[1]  the state of the index
-- ARGV[2]  order: "asc" (lowest score first) or "desc"
-- ARGV[3]  cursor score, "" for the first page
-- ARGV[4]  cursor member
-- ARGV[5]  limit: most jobs, integer >= 1
-- ARGV[6]  job-state key prefix (keys.JobState(tenant, ""))
-- ARGV[7]  most index entries read, integer >= ARGV[5]
-- ARGV[8]  "1" to ZREM the stale entries read, "0" to leave them
--
-- Returns {dispatched, more (0|1), last_score, last_member, stale, rows...}:
-- the dispatched sequence (0 when none), whether entries may follow the
-- last one read, that entry's score and member ("" when none was read, and
-- then the cursor stays), how many stale entries were skipped, then one
-- {id, score, {field, value, ...}} per job, in order.

local key, state, desc = KEYS[1], ARGV[1], ARGV[2] == 'desc'
local limit, budget = tonumber(ARGV[5]), tonumber(ARGV[7])
if limit == nil or limit < 1 or budget == nil or budget < limit then
  return redis.error_reply('ERR job_list: limit must be >= 1 and the read budget >= limit')
end
local cs, cm = tonumber(ARGV[3]), ARGV[4]

-- start: the rank of the first entry after (cs, cm) in the page's order.
local function start()
  if cs == nil then return 0 end
  local sc = redis.call('ZSCORE', key, cm)
  if sc and tonumber(sc) == cs then
    if desc then return redis.call('ZREVRANK', key, cm) + 1 end
    return redis.call('ZRANK', key, cm) + 1
  end
  local n, off = 0, 0
  if desc then
    n = redis.call('ZCOUNT', key, '(' .. ARGV[3], '+inf')
  else
    n = redis.call('ZCOUNT', key, '-inf', '(' .. ARGV[3])
  end
  while true do
    local ties
    if desc then
      ties = redis.call('ZREVRANGEBYSCORE', key, ARGV[3], ARGV[3], 'LIMIT', off, 100)
    else
      ties = redis.call('ZRANGEBYSCORE', key, ARGV[3], ARGV[3], 'LIMIT', off, 100)
    end
    for _, m in ipairs(ties) do
      if (desc and m > cm) or (not desc and m < cm) then n = n + 1 else return n end
    end
    if #ties < 100 then return n end
    off = off + 100
  end
end

local pos = start()
local rows, stale = {}, {}
local read, last_s, last_m = 0, '', ''
local more = 0
while #rows < limit do
  local want = math.min(limit - #rows, budget - read)
  if want <= 0 then more = 1; break end
  local ents
  if desc then
    ents = redis.call('ZREVRANGE', key, pos, pos + want - 1, 'WITHSCORES')
  else
    ents = redis.call('ZRANGE', key, pos, pos + want - 1, 'WITHSCORES')
  end
  for i = 1, #ents, 2 do
    local id, score = ents[i], ents[i + 1]
    last_s, last_m = score, id
    -- pcall: HGETALL fails (WRONGTYPE) only on the older string marker.
    local h = redis.pcall('HGETALL', ARGV[6] .. id)
    local st = nil
    if type(h) == 'table' and not h['err'] then
      for j = 1, #h, 2 do
        if h[j] == 'state' then st = h[j + 1] end
      end
    end
    if st == state then
      rows[#rows + 1] = {id, score, h}
    else
      stale[#stale + 1] = id
    end
  end
  read = read + #ents / 2
  pos = pos + #ents / 2
  if #ents / 2 < want then break end
end
if #rows >= limit or more == 1 then
  if redis.call('ZCARD', key) > pos then more = 1 else more = 0 end
end
if ARGV[8] == '1' and #stale > 0 then
  redis.call('ZREM', key, unpack(stale))
end
local out = {tonumber(redis.call('GET', KEYS[2])) or 0, more, last_s, last_m, #stale}
for _, r in ipairs(rows) do out[#out + 1] = r end
return out
