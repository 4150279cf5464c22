-- base.lua: what every delayq script needs, and all that the scripts which
-- keep no jobs (schedules.lua) need: the bucket tag, errors, integer
-- arguments, Redis's clock. Included (the line "--!include base.lua")
-- at the top of lib.lua, and instead of lib.lua by a script that needs no
-- more: its ~40 µs of function definitions per call are lib.lua's cost, not
-- this file's (docs/redis-store.md, "Assembling a script").

local B = KEYS[1]
local PREFIX, BUCKET = string.match(B or '', '^{(.+):(%d+)}$')
if not PREFIX then
  return redis.error_reply('invalid_argument KEYS[1]: expected {<prefix>:<bucket>}')
end

-- --- errors -------------------------------------------------------------------

-- Ends the script with the error reply "<code> <message>" (code: a SPEC §5
-- code). The reason travels beside the Lua error, not in it: Redis's pcall
-- turns an error value into text with a position in front.
local aborted
local function abort(code, msg)
  aborted = code .. ' ' .. msg
  error('delayq abort', 0)
end

-- Runs the script's main function; turns abort() into its error reply and
-- lets any other error through as Redis reports it.
local function run(main)
  local ok, res = pcall(main)
  if ok then return res end
  if aborted then return redis.error_reply(aborted) end
  error(res, 0)
end

local function fmt(n) return string.format('%d', n) end

local function quote(id)
  if #id > 64 then return "job '" .. string.sub(id, 1, 64) .. "...'" end
  return "job '" .. id .. "'"
end

-- A field's name in an error: "ttr_ms", or "ttr_ms (job 3)" when `job` (the
-- index of the job in a batch) is given. Built only when an error is
-- reported: batches check every job's fields.
local function field_name(name, job)
  if job then return name .. ' (job ' .. fmt(job) .. ')' end
  return name
end

local floor = math.floor

-- ARGV[i] as an integer in [lo, hi], or abort naming the field (of job `job`).
local function int_arg(i, name, lo, hi, job)
  local v = tonumber(ARGV[i])
  if v == nil or v ~= floor(v) or v < lo or v > hi then
    abort('invalid_argument', field_name(name, job) .. ': expected an integer in [' .. fmt(lo)
      .. ', ' .. fmt(hi) .. '], got ' .. string.format('%q', string.sub(tostring(ARGV[i]), 1, 40)))
  end
  return v
end

-- Redis's clock (TIME): Unix ms and µs. Only the push scripts read it: a
-- subscription's expiry and a ledger's leases and rate are compared by
-- every server, and Redis is the one clock they all see. (µs since 1970
-- are < 2^53: exact in Lua's doubles.)
local function redis_time()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + floor(us / 1000), s * 1000000 + us
end
