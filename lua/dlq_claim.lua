-- dlq_claim.lua: claim or release dead letters for a redrive (package
-- dlq), so two redrives at once never both put one dead letter back on the
-- queue.
--
-- Mode "claim" claims each dead letter still stored as the caller read it
-- (the SHA-1 of its record) and not claimed yet (or whose claim ended): its
-- field in the claims hash becomes "<token>:<now + ttl>". A letter gone or
-- changed since the read (another redrive put it back and removed it, a
-- delete, a new death) is not claimed. Mode "release" removes each id's
-- claim held by token (a claim that ended and was taken by another redrive
-- is left).
--
-- KEYS[1]   the tenant's claims hash (keys.DeadRedriving)
-- KEYS[2]   the tenant's dead letters (keys.DeadRecords)
-- ARGV[1]   mode: "claim" or "release"
-- ARGV[2]   the redrive's token (no ':')
-- ARGV[3]   the claim's length, ms (keys.RedriveClaimTTL), >= 1
-- ARGV[4..] claim: pairs of job id and the SHA-1 of its record as read;
--           release: job ids
--
-- Returns for "claim" one integer per id: 1 when this call claimed it, 0
-- when another redrive holds it, -1 when its letter is gone or changed;
-- for "release" how many claims it removed.

local mode, token, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if (mode ~= 'claim' and mode ~= 'release') or token == '' or string.find(token, ':', 1, true) or ttl == nil or ttl < 1 then
  return redis.error_reply('ERR dlq_claim: want mode claim or release, a token without ":" and a ttl >= 1')
end
if mode == 'claim' and #ARGV % 2 ~= 1 then
  return redis.error_reply('ERR dlq_claim: claim wants pairs of job id and sha1')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out, released = {}, 0
local step = mode == 'claim' and 2 or 1
for i = 4, #ARGV, step do
  local id = ARGV[i]
  local v = redis.call('HGET', KEYS[1], id)
  local owner, ends
  if v then
    local c = string.find(v, ':', 1, true)
    owner, ends = string.sub(v, 1, c and c - 1 or -1), tonumber(c and string.sub(v, c + 1) or '') or 0
  end
  if mode == 'claim' then
    local rec = redis.call('HGET', KEYS[2], id)
    if not rec or redis.sha1hex(rec) ~= ARGV[i + 1] then
      out[#out + 1] = -1
    elseif v and owner ~= token and ends > now then
      out[#out + 1] = 0
    else
      redis.call('HSET', KEYS[1], id, token .. ':' .. (now + ttl))
      out[#out + 1] = 1
    end
  elseif v and owner == token then
    redis.call('HDEL', KEYS[1], id)
    released = released + 1
  end
end
if mode == 'claim' then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return out
end
return released
