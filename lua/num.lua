-- num.lua: num(s), tonumber for the string arguments of a call, memoized
-- for the call. The assembled admission scripts, submit.lua and enqueue.lua
-- have this file first (package lua: admitParts, and Enqueue's include
-- list); run on its own it only defines a local function and touches
-- nothing. TestNumIncludedBeforeUse checks that every script calling num
-- has it.
--
-- Redis' Lua turns a string into a number with strtod, about 0.15 µs a
-- tonumber here, and a decision's arguments (cost, policy number, counts,
-- flags, TTLs) repeat a few distinct strings over a whole call, so a table
-- hit (about 0.02 µs) answers most of them. docs/perf.md step 23 has the
-- figures. num(s) answers as tonumber(s) does, for every s: the number, or
-- nil for nil and for a string that is not a number. Values read from keys
-- (each TAT, counter and TTL differs) keep tonumber.
--
-- KEYS  none of its own.
-- ARGV  none of its own.
-- Returns (from num) a number or nil.

local num_of = {}

local function num(s)
  local v = num_of[s]
  if v == nil then
    if s == nil then
      return nil
    end
    v = tonumber(s) or false
    num_of[s] = v
  end
  return v or nil
end
