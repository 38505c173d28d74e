-- admit_prelude.lua: the locals every part of the admission script uses.
-- lua.Admit() and lua.AdmitFor() put this file first, before the algorithm
-- modules and the driver admit.lua, which then reach these functions as
-- upvalues: a global access (math, string, redis, tonumber, KEYS, ARGV) is a
-- lookup in Redis' protected globals table on every use, and dropping them
-- took about a tenth off the script's time per decision (measured with
-- redis-benchmark on a 32-decision call).
--
-- KEYS  none: it only defines locals.
-- ARGV  none.
-- Returns nothing; run on its own it touches nothing.

local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local fmt, tonumber, call = string.format, tonumber, redis.call
local KEYS, ARGV = KEYS, ARGV
