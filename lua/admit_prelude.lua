-- admit_prelude.lua: the locals every part of the admission script uses.
-- lua.Admit() and lua.AdmitFor() put this file first after num.lua, before
-- the algorithm modules and the driver admit.lua, which then reach these as
-- upvalues: a global access (math, string, redis, tonumber, KEYS, ARGV) is a
-- lookup in Redis' protected globals table on every use, and dropping them
-- took about a tenth off the script's time per decision (measured with
-- redis-benchmark on a 32-decision call).
--
-- Write-back state of one call: an algorithm module may defer a String
-- key's SET (defer_set) instead of writing it on every decision; a later
-- decision of the same call reads the deferred value (deferred_val) instead
-- of the key, and admit_run writes each deferred key once, with the value
-- and PX of its last decision (deferred_flush), so m decisions on one
-- tenant cost one SET, not m, and leave the same state as m SETs would.
-- bl_pending[backlog key] is the cost that submit.lua's deferred enqueues
-- add to that backlog counter when they are written; the backlog gate adds
-- it to the counter it reads.
--
-- KEYS  none: it only defines locals.
-- ARGV  none.
-- Returns nothing; run on its own it touches nothing.

local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local fmt, tonumber, call = string.format, tonumber, redis.call
local KEYS, ARGV = KEYS, ARGV

local deferred_val, deferred_px, deferred_keys = {}, {}, {}
local bl_pending = {}

local function defer_set(key, val, px)
  if deferred_val[key] == nil then
    deferred_keys[#deferred_keys + 1] = key
  end
  deferred_val[key], deferred_px[key] = val, px
end

local function deferred_flush()
  for i = 1, #deferred_keys do
    local key = deferred_keys[i]
    call('SET', key, deferred_val[key], 'PX', deferred_px[key])
  end
end
