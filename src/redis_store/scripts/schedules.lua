#!lua
-- schedules: the schedules of a deployment (periodic jobs), one hash under
-- bucket 0's tag, and the firings claimed but not yet cleared
-- (docs/redis-store.md, "Schedules"). A firing crosses slots (its jobs live
-- in their own buckets), so it is three steps: `claim` here, then
-- schedule_fire.lua in each job bucket, then `clear` here. Between the
-- first and the last, the claim's PENDING entry says what remains to do, so
-- any server can finish it.
--
-- KEYS[1]  bucket 0's tag "{<prefix>:0}"
-- ARGV[1]  the operation, then its arguments:
--   put <record>       creates the schedule, or replaces the definition of
--            the one of that name (the record's definition, paused flag):
--            created_ms, the firing state and pause_reason kept (reason
--            cleared when paused is 0), version and revision + 1 (1 and 1
--            for a new one), updated_ms = now. Reply: the record as stored.
--   delete <name>      removes the schedule and any PENDING of it. Reply:
--            the record as it was. Error not_found.
--   get <name>         Reply: {now_ms, record, pending} (pending "" when
--            none). Error not_found.
--   list               Reply: {now_ms, then per schedule record, pending},
--            unordered (the caller sorts).
--   claim and clear come as a batch: ARGV is a run of items of 7 fields
--   each (a clear's last four empty); the reply is an array with one reply
--   per item, in order, an error reply for an item that failed.
--   claim <name> <revision> <paused> <state> <pause_reason> <payload>
--            the compare-and-set of a firing. If the stored revision is not
--            <revision>: {"stale", record}. Else if a PENDING is there (a
--            claim whose jobs were not all made yet): {"pending", record,
--            pending}. Else the firing state becomes <state> and
--            <pause_reason> (paused set when <paused> is 1), revision + 1,
--            and when <payload> is not "" it is kept as the PENDING
--            {revision, now, payload}: {"applied", record}. Error not_found.
--   clear <name> <revision> "" "" "" ""  removes the PENDING made at <revision>
--            (another is kept). Reply: 1 removed, 0 not.
-- Errors   invalid_argument (operation, name, record, revision), nothing
--          changed; not_found as said.
--
-- The record (version 1; EncodeScheduleRecord in redis_schedule.cc): head
-- `>BI7I7I6I6B` (record version, revision, version, created_ms,
-- updated_ms, paused), then the definition (4-byte length), the firing state
-- (4-byte length) and pause_reason (2-byte length). This script reads the
-- head and moves the three parts whole; it never looks inside the first two.
-- A PENDING is `>BI7I6` (1, revision made, claimed at ms) and the payload,
-- the caller's (jobs and ids to withdraw), never looked into here.
--
-- Time is Redis's (TIME), as in subscriptions.lua: every server compares a
-- PENDING's age on one clock.
--!include base.lua

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

local function put(now)
  local given = unpack_record(ARGV[2], 'record')
  if #given.def < 1 or #given.def < 1 + string.byte(given.def, 1) then
    abort('invalid_argument', 'record: its definition does not start with a name')
  end
  -- The name leads the definition (1-byte length).
  local name = check_name(struct.unpack('>Bc0', given.def))
  local old = redis.call('HGET', K_SCHED, name)
  local r = given
  if old then
    r = unpack_record(old, 'stored record')
    if r.revision >= MAX_REVISION then abort('invalid_argument', 'revision: at its limit') end
    r.revision, r.version = r.revision + 1, r.version + 1
    r.def, r.paused = given.def, given.paused
  else
    r.revision, r.version, r.created = 1, 1, now
  end
  r.updated = now
  if r.paused == 0 then r.reason = '' end
  local stored = pack_record(r)
  redis.call('HSET', K_SCHED, name, stored)
  return stored
end

local function delete()
  local name = check_name(ARGV[2])
  local rec = load_record(name)
  redis.call('HDEL', K_SCHED, name)
  redis.call('HDEL', K_PENDING, name)
  return rec
end

local function get(now)
  local name = check_name(ARGV[2])
  local rec = load_record(name)
  return { now, rec, redis.call('HGET', K_PENDING, name) or '' }
end

local function list(now)
  local out = { now }
  local pending = {}
  local p = redis.call('HGETALL', K_PENDING)
  for i = 1, #p, 2 do pending[p[i]] = p[i + 1] end
  local all = redis.call('HGETALL', K_SCHED)
  for i = 1, #all, 2 do
    out[#out + 1] = all[i + 1]
    out[#out + 1] = pending[all[i]] or ''
  end
  return out
end

-- The item of a batch at ARGV[at..at+6] (see the contract above).
local function claim(now, at)
  local name = check_name(ARGV[at + 1])
  local revision = int_arg(at + 2, 'revision', 0, MAX_REVISION)
  local paused = int_arg(at + 3, 'paused', 0, 1)
  local state, reason, payload = ARGV[at + 4], ARGV[at + 5], ARGV[at + 6]
  if type(payload) ~= 'string' then
    abort('invalid_argument', 'claim: name, revision, paused, state, pause_reason, payload')
  end
  if #reason > 65535 then abort('invalid_argument', 'pause_reason: at most 65535 bytes') end
  local rec = load_record(name)
  -- The revision alone first: another server's claim of the same firing
  -- (the usual loser's case) stops here without decoding the record.
  if #rec < SCHED_HEAD_BYTES then abort('invalid_argument', 'stored record: shorter than its head') end
  local _, stored_revision = struct.unpack('>BI7', rec)
  if stored_revision ~= revision then return { 'stale', rec } end
  local pending = redis.call('HGET', K_PENDING, name)
  if pending then return { 'pending', rec, pending } end
  local r = unpack_record(rec, 'stored record')
  if r.revision >= MAX_REVISION then abort('invalid_argument', 'revision: at its limit') end
  r.revision = r.revision + 1
  r.state, r.reason = state, reason
  if paused == 1 then r.paused = 1 end
  local stored = pack_record(r)
  redis.call('HSET', K_SCHED, name, stored)
  if payload ~= '' then
    redis.call('HSET', K_PENDING, name, struct.pack(PENDING_HEAD, 1, r.revision, now) .. payload)
  end
  return { 'applied', stored }
end

local function clear(_, at)
  local name = check_name(ARGV[at + 1])
  local revision = int_arg(at + 2, 'revision', 0, MAX_REVISION)
  local pending = redis.call('HGET', K_PENDING, name)
  if not pending or #pending < 14 then return 0 end
  local _, made = struct.unpack(PENDING_HEAD, pending)
  if made ~= revision then return 0 end
  redis.call('HDEL', K_PENDING, name)
  return 1
end

local OPS = { put = put, delete = delete, get = get, list = list }
local ITEMS = { claim = claim, clear = clear }
local ITEM_FIELDS = 7

-- claim and clear come in batches (a round's firings share one call): one
-- reply per item, an error reply for an item that failed (not_found, a bad
-- argument), which changed nothing; the other items are not affected.
local function items(now)
  if #ARGV % ITEM_FIELDS ~= 0 then
    abort('invalid_argument', 'claim and clear: items of ' .. fmt(ITEM_FIELDS) .. ' fields')
  end
  local out = {}
  for at = 1, #ARGV, ITEM_FIELDS do
    local op = ITEMS[ARGV[at]]
    if not op then abort('invalid_argument', 'operation: claim or clear in a batch') end
    local ok, res = pcall(op, now, at)
    if ok then
      out[#out + 1] = res
    elseif aborted then
      out[#out + 1] = redis.error_reply(aborted)
      aborted = nil
    else
      error(res, 0)
    end
  end
  return out
end

local function main()
  local now = redis_time()
  if ITEMS[ARGV[1]] then return items(now) end
  local op = OPS[ARGV[1]]
  if not op then
    abort('invalid_argument', 'operation: put, delete, get, list, claim or clear')
  end
  return op(now)
end

return run(main)
