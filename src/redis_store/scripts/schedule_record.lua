-- schedule_record.lua: a schedule's record and the compare-and-set of a
-- firing on it, shared by schedules.lua (which keeps the records) and
-- schedule_fire.lua (whose "c" entries claim and fire in one step when the
-- jobs live in bucket 0 with the records). Not a script by itself: the line
-- "--!include schedule_record.lua" is replaced by this file, after base.lua
-- or lib.lua (docs/redis-store.md, "Assembling a script"). Its keys are
-- bucket 0's: only valid when KEYS[1] is bucket 0's tag.
--
-- The record (version 1; EncodeScheduleRecord in redis_schedule.cc): head
-- `>BI7I7I6I6B` (record version, revision, version, created_ms,
-- updated_ms, paused), then the definition (4-byte length), the firing state
-- (4-byte length) and pause_reason (2-byte length). These functions read the
-- head and move the three parts whole; they never look inside the first two.

local K_SCHED = B .. ':sched'           -- hash: name -> schedule record
local K_PENDING = B .. ':sched:pending' -- hash: name -> PENDING of a claimed firing
local REC_VERSION = 1
local SCHED = '>BI7I7I6I6BI4c0I4c0Hc0'
local SCHED_HEAD_BYTES = 28
local PENDING_HEAD = '>BI7I6'
local MAX_REVISION = 9007199254740991  -- 2^53 - 1: exact in a double

local function check_name(name)
  if type(name) ~= 'string' or #name == 0 or #name > 100 or
      not string.find(name, '^[A-Za-z0-9._:-]+$') then
    abort('invalid_argument', 'name: 1-100 bytes of [A-Za-z0-9._:-]')
  end
  return name
end

-- A record's fields, or abort naming what is wrong with it.
local function unpack_record(rec, what)
  if type(rec) ~= 'string' or #rec < SCHED_HEAD_BYTES + 10 then
    abort('invalid_argument', what .. ': shorter than its head')
  end
  local version = string.byte(rec, 1)
  if version ~= REC_VERSION then
    abort('invalid_argument', what .. ': version ' .. fmt(version) .. ', these scripts write '
      .. fmt(REC_VERSION))
  end
  -- Every length is checked before unpack reads past it.
  local def_len = struct.unpack('>I4', rec, SCHED_HEAD_BYTES + 1)
  local at = SCHED_HEAD_BYTES + 5 + def_len
  if #rec < at + 3 then abort('invalid_argument', what .. ': cut short') end
  local state_len = struct.unpack('>I4', rec, at)
  at = at + 4 + state_len
  if #rec < at + 1 then abort('invalid_argument', what .. ': cut short') end
  local reason_len = struct.unpack('>H', rec, at)
  if #rec < at + 1 + reason_len then abort('invalid_argument', what .. ': cut short') end
  local _, revision, sversion, created, updated, paused, def, state, reason =
    struct.unpack(SCHED, rec)
  return { revision = revision, version = sversion, created = created, updated = updated,
           paused = paused, def = def, state = state, reason = reason }
end

local function pack_record(r)
  return struct.pack(SCHED, REC_VERSION, r.revision, r.version, r.created, r.updated, r.paused,
                     #r.def, r.def, #r.state, r.state, #r.reason, r.reason)
end

local function load_record(name)
  local rec = redis.call('HGET', K_SCHED, name)
  if not rec then abort('not_found', "schedule '" .. name .. "' does not exist") end
  return rec
end

-- The compare-and-set of a firing on schedule `name` (checked by the
-- caller): if the stored revision is not `revision`, 'stale' and the
-- record; else if a PENDING is there (a claim whose jobs were not all made
-- yet), 'pending', the record and the PENDING; else the firing state
-- becomes `state` and `reason` (paused set when `paused` is 1), revision
-- + 1: 'applied' and the record as stored. Error not_found.
local function claim_record(name, revision, paused, state, reason)
  local rec = load_record(name)
  -- The revision alone first: another server's claim of the same firing
  -- (the usual loser's case) stops here without decoding the record.
  if #rec < SCHED_HEAD_BYTES then abort('invalid_argument', 'stored record: shorter than its head') end
  local _, stored_revision = struct.unpack('>BI7', rec)
  if stored_revision ~= revision then return 'stale', rec end
  local pending = redis.call('HGET', K_PENDING, name)
  if pending then return 'pending', rec, pending end
  local r = unpack_record(rec, 'stored record')
  if r.revision >= MAX_REVISION then abort('invalid_argument', 'revision: at its limit') end
  r.revision = r.revision + 1
  r.state, r.reason = state, reason
  if paused == 1 then r.paused = 1 end
  local stored = pack_record(r)
  redis.call('HSET', K_SCHED, name, stored)
  return 'applied', stored
end
